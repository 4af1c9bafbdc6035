"""Commands kiwb prints for the user to run, quoted so that a path with spaces (or any shell
character) pastes back whole. Pure Python."""

from __future__ import annotations

import shlex


def command(*words: object) -> str:
    """`kiwb WORD ...` with each word quoted where the shell needs it."""
    return "kiwb " + shlex.join(str(word) for word in words)
