"""User-facing errors: one clear line naming what is wrong and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def spelt_near(word: str, choices: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The one of `choices` spelt nearest `word`, for a refusal's "did you mean ...?", or None
    where none reaches `cutoff` (difflib's similarity): a word near nothing is not corrected."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return near[0] if near else None


class KiwbError(Exception):
    """An error caused by the user's input or environment, shown without a traceback."""


class ConfigError(KiwbError):
    """The project configuration (kiwb.toml) is invalid."""


class DataError(KiwbError):
    """A data file cannot be read or lacks what is needed."""


class TeacherError(KiwbError):
    """A teacher checkpoint cannot be used."""


class StoreDamaged(KiwbError):
    """The project's store cannot be read as a store, or is empty beside the project's work."""
