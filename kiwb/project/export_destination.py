"""Where an export may go: checked before the job is recorded and again as it starts (the
folder can change in between). No torch."""

from __future__ import annotations

import os
from pathlib import Path

from kiwb.errors import KiwbError


def check_writable(destination: Path) -> None:
    """The export is staged beside `destination` and renamed into place: refuse, in one line,
    a folder this user cannot write to (or a parent that is a file)."""
    parent = destination.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise KiwbError(f"{destination}: {parent} is a file, not a folder; export somewhere else")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise KiwbError(f"{destination}: {parent} cannot be written (read-only, or not this "
                        "user's); export to a folder you can write to (--to)")
