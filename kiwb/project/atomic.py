"""Atomic file writes: a reader (or a crash) never sees half a file."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

# What a killed write leaves beside its target: a staging file or folder (from mkstemp or
# mkdtemp: eight random characters) and, while a folder is being replaced, the old folder.
_STAGING = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")
_RETIRED = re.compile(r"\.(?P<target>.+)\.old-\d+")


def fsync_directory(folder: Path) -> None:
    """Make the renames in `folder` durable (a no-op where folders cannot be opened, as on Windows)."""
    if os.name != "posix":
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


@contextmanager
def atomic_open(path: Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temp file beside `path`; on success fsync it and rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (UTF-8)."""
    with atomic_open(path, "wb") as handle:
        handle.write(text.encode("utf-8"))


def atomic_write_with(path: Path, writer: Callable[[IO], None]) -> None:
    """Let `writer` fill a binary handle, then move the result into place atomically."""
    with atomic_open(path, "wb") as handle:
        writer(handle)


@contextmanager
def atomic_directory(path: Path) -> Iterator[Path]:
    """Yield a temp folder beside `path`; on success it takes the place of `path`.

    A new folder arrives in one rename. Replacing a folder takes two (old out, new in);
    a crash between them leaves the old folder under a dot-name that
    `recover_interrupted_writes` puts back. Readers ignore dot-named folders.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield staging
        _fsync_tree(staging)
        if path.exists():
            retired = path.with_name(f".{path.name}.old-{os.getpid()}")
            # One left by a killed process that had our pid is a stale copy: `path` exists.
            shutil.rmtree(retired, ignore_errors=True)
            os.replace(path, retired)
            os.replace(staging, path)
            fsync_directory(path.parent)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, path)
            fsync_directory(path.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _fsync_tree(folder: Path) -> None:
    for file in folder.rglob("*"):
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
    fsync_directory(folder)


def recover_interrupted_writes(folder: Path, target: str | None = None) -> None:
    """Clear what killed atomic writes left in `folder`: an old folder whose replacement never
    arrived goes back in place, and staging files and folders are deleted.

    `target` limits this to the leftovers of one name. Call it only where no other process
    is writing those names, or their staging would go too.
    """
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        retired, staging = _RETIRED.fullmatch(entry.name), _STAGING.fullmatch(entry.name)
        found = retired or staging
        if found is None or target not in (None, found["target"]):
            continue
        original = folder / found["target"]
        if retired and not original.exists():
            os.replace(entry, original)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    fsync_directory(folder)
