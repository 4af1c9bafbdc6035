"""Atomic file writes: a reader (or a crash) never sees half a file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


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
    """Yield a temp folder beside `path`; on success it replaces `path` in one rename.

    A crash at any moment leaves either the old folder or the new one, never a mix:
    readers ignore the dot-named temp folders.
    """
    import shutil

    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield staging
        for file in staging.rglob("*"):
            if file.is_file():
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())
        if path.exists():
            retired = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, retired)
            os.replace(staging, path)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
