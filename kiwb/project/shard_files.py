"""Shard files that say what they hold: each is written with its first row, size and SHA-256
recorded in the store, and checked against them whenever it is read, so a shard moved,
swapped, truncated or deleted on disk is named instead of read as something else.

A score shard holds a `rows` array (its texts' row numbers), and so does a representation
shard written since version 8; a shard written before kiwb recorded hashes is checked by that
array alone, and its hash is recorded the first time it passes.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_write_with


@dataclass(frozen=True)
class ShardRecord:
    """What the store says of one finished shard."""

    shard: int
    rows: int                # how many texts it holds
    row_start: int | None    # its first text's row; None: recorded before version 8
    bytes: int | None
    sha256: str | None


class DamagedShard(KiwbError):
    """A shard file that is not what the store recorded; `kiwb score` rescores it."""


def encoded(arrays: dict[str, np.ndarray]) -> bytes:
    """The .npz bytes of `arrays`, as written to disk."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def write_shard_file(path: Path, arrays: dict[str, np.ndarray]) -> tuple[int, str]:
    """Write `arrays` atomically; return the file's size and SHA-256 for the store."""
    data = encoded(arrays)
    atomic_write_with(path, lambda handle: handle.write(data))
    return len(data), hashlib.sha256(data).hexdigest()


def problem_with(data: bytes | None, record: ShardRecord, expected_start: int) -> str | None:
    """Why these bytes (None: no file) are not the shard `record` describes, or None. The
    first row is the one the store recorded, else the one its position in the set implies."""
    if data is None:
        return "the file is missing"
    if record.bytes is not None and len(data) != record.bytes:
        return f"{len(data):,} bytes where {record.bytes:,} were written"
    if record.sha256 is not None and hashlib.sha256(data).hexdigest() != record.sha256:
        return "its content is not what was written (another shard's, or changed)"
    try:
        with np.load(io.BytesIO(data)) as arrays:
            rows = arrays["rows"] if "rows" in arrays.files else None
            found = (int(rows[0]), len(rows)) if rows is not None and len(rows) else None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        return f"not a readable .npz file ({type(error).__name__})"
    start = record.row_start if record.row_start is not None else expected_start
    if found is not None and found != (start, record.rows):
        return (f"it holds rows {found[0] + 1:,}-{found[0] + found[1]:,} where rows "
                f"{start + 1:,}-{start + record.rows:,} belong")
    return None


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def checked_arrays(path: Path, record: ShardRecord, expected_start: int, what: str,
                   fix: str) -> dict[str, np.ndarray]:
    """The arrays of a shard file that is what the store recorded; else DamagedShard in one
    line naming the file, `what` it holds and `fix`."""
    data = read_bytes(path)
    problem = problem_with(data, record, expected_start)
    if problem is not None:
        raise DamagedShard(f"{path}: {what} is damaged ({problem}); {fix}")
    with np.load(io.BytesIO(data)) as arrays:
        return {name: arrays[name] for name in arrays.files}
