"""The connection to a project's SQLite file (WAL mode): opening, migrating, transactions.

The store's parts (jobs, events, shard claims) each build on this module, and `store.py`
puts them together, so none of them needs to import another's home.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kiwb.project.schema import SCHEMA_VERSION, migrate, refuse_if_newer, stored_version

# How long a write waits for another writer (a job's transaction) before "database is locked".
BUSY_TIMEOUT_S = 30.0


class Database:
    """An open connection to a store file, brought to the current schema version."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        self._migrate()

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
