"""Copies of the project's store, so a damaged store can be put back: one is taken after each
job and each change of the given labels made on the command line, with SQLite's online backup
(consistent while other processes write), checked, then renamed into backups/. No torch."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from kiwb.errors import KiwbError
from kiwb.project.paths import ProjectPaths

KEEP = 3  # the newest copies kept; older ones are removed as new ones are taken
PREFIX = "store-"


@dataclass(frozen=True)
class Backup:
    path: Path
    taken_at: float
    after: str  # what it was taken after: "job 12 (train muki-hard)", "kiwb labels import"

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def back_up(connection: sqlite3.Connection, root: Path, after: str) -> Path | None:
    """Copy the store open on `connection` into the project's backups/ (the oldest copies
    beyond KEEP removed); None when the copy does not pass SQLite's quick check (a store
    already damaged: the copies before it are kept as they are)."""
    folder = ProjectPaths(root).backups
    folder.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    slug = "".join(c if c.isalnum() else "-" for c in after).strip("-")[:40]
    target = folder / f"{PREFIX}{stamp}-{slug}.sqlite"
    staging = folder / f".{target.name}.{os.getpid()}.tmp"
    try:
        with contextlib.closing(sqlite3.connect(staging)) as copy:
            connection.backup(copy)
            passed = copy.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            copy.execute("INSERT OR REPLACE INTO meta VALUES ('backup_after', ?)", (after,))
            copy.commit()
            # one self-contained file, which a reader opens without -wal or -shm files beside it
            copy.execute("PRAGMA journal_mode=DELETE")
    except sqlite3.DatabaseError:
        passed = False
    if not passed:
        staging.unlink(missing_ok=True)
        return None
    os.replace(staging, target)
    for old in list_backups(root)[:-KEEP]:
        old.path.unlink(missing_ok=True)
    return target


def list_backups(root: Path) -> list[Backup]:
    """The copies kept, oldest first."""
    folder = ProjectPaths(root).backups
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob(f"{PREFIX}*.sqlite")):
        after = ""
        with contextlib.suppress(sqlite3.DatabaseError), contextlib.closing(
                sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as copy:
            row = copy.execute("SELECT value FROM meta WHERE key = 'backup_after'").fetchone()
            after = row[0] if row else ""
        found.append(Backup(path, path.stat().st_mtime, after))
    return found


def integrity_problems(path: Path, limit: int = 5) -> list[str]:
    """What SQLite's integrity check finds wrong with a store file (empty: nothing)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = [row[0] for row in db.execute(f"PRAGMA integrity_check({limit})")]
    except sqlite3.DatabaseError as error:
        return [str(error)]
    return [] if rows == ["ok"] else [line for row in rows for line in str(row).splitlines()]


def restore(root: Path, chosen: Path | None = None) -> tuple[Backup, Path | None]:
    """Put back a copy (the newest by default) as the project's store; the store it replaces
    is moved aside (with its -wal and -shm files), never deleted. Returns the copy and where
    the replaced store went (None: there was none)."""
    backups = list_backups(root)
    if chosen is not None:
        backups = [item for item in backups if item.path.name == Path(chosen).name]
        if not backups:
            raise KiwbError(f"{root}: no copy {Path(chosen).name!r} in backups/; kiwb store "
                            "backups lists them")
    if not backups:
        raise KiwbError(f"{root}: no copy of the store was kept (one is taken after each job); "
                        "nothing to restore")
    store = ProjectPaths(root).store
    aside = None
    if store.exists():
        aside = store.with_name(f"{store.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(f"{store}{suffix}")
            if part.exists():
                os.replace(part, Path(f"{aside}{suffix}"))
    staging = store.with_name(f".{store.name}.restoring")
    shutil.copyfile(backups[-1].path, staging)
    with contextlib.closing(sqlite3.connect(staging)) as copy:  # a store again, not a copy
        copy.execute("DELETE FROM meta WHERE key = 'backup_after'")
        copy.commit()
        copy.execute("PRAGMA journal_mode=WAL")
    os.replace(staging, store)
    return backups[-1], aside
