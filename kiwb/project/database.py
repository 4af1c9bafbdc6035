"""The connection to a project's SQLite file (WAL mode): opening, migrating, transactions.

The store's parts (jobs, events, shard claims) each build on this module, and `store.py`
puts them together, so none of them needs to import another's home.
"""

from __future__ import annotations

import shlex
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kiwb.errors import StoreDamaged
from kiwb.project.schema import SCHEMA_VERSION, migrate, refuse_if_newer, stored_version

# How long a write waits for another writer (a job's transaction) before "database is locked".
BUSY_TIMEOUT_S = 30.0


class Database:
    """An open connection to a store file, brought to the current schema version."""

    def __init__(self, path: Path):
        self.path = Path(path)
        refuse_empty_beside_work(self.path)
        try:
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            enter_wal_mode(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            self._migrate()
        except sqlite3.DatabaseError as error:
            if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
                raise
            raise StoreDamaged(damaged_message(self.path, error)) from None

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction taken up front, so concurrent writers queue instead of racing."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @property
    def connection(self) -> sqlite3.Connection:
        """The SQLite connection (autocommit: wrap writes in `transaction()`)."""
        return self._db

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row["value"])

    def _migrate(self) -> None:
        """Bring an older store to SCHEMA_VERSION in place; refuse a newer one."""
        version = stored_version(self._db)
        if version == SCHEMA_VERSION:
            return  # the common case takes no write lock, so opening never waits on a writer
        refuse_if_newer(self.path, version)
        with self.transaction() as db:
            migrate(self.path, db)


def enter_wal_mode(db: sqlite3.Connection) -> None:
    """Switch the file to WAL once; wait out another process that holds its first lock.

    SQLite answers "database is locked" at once, without its busy handler, when the journal mode
    is changed while another connection holds a lock on a file still in rollback mode: two jobs
    opening a brand-new project together hit it. WAL is kept in the file, so later opens only
    read the mode and never retry.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def damaged_message(path: Path, error: BaseException) -> str:
    """A store SQLite cannot read, in one line: the file, what SQLite said, how to recover."""
    return (f"{path}: the project store is damaged ({error}); put back the copy kiwb kept "
            f"after the last job: kiwb store restore {shlex.quote(str(path.parent))} (kiwb "
            "store backups lists the copies)")


def refuse_empty_beside_work(path: Path) -> None:
    """An empty or missing store beside scores/ or runs/ that hold files is this project's
    store lost, not a new project: opening it would start a new store and hide that work."""
    if path.exists() and path.stat().st_size > 0:
        return
    work = [name for name in ("scores", "runs") if _holds_files(path.parent / name)]
    if work:
        state = "empty" if path.exists() else "missing"
        raise StoreDamaged(
            f"{path} is {state} while {' and '.join(work)}/ hold this project's work; put back "
            f"the copy kiwb kept: kiwb store restore {shlex.quote(str(path.parent))}, or move "
            f"{' and '.join(work)}/ aside to start the project afresh")


def _holds_files(folder: Path) -> bool:
    return folder.is_dir() and any(child.is_file() for child in folder.rglob("*"))
