"""The project store: one SQLite file (WAL mode) holding run records, events and summaries.

Per-text score arrays live beside it as shard files; the store records which shards are
finished, so a reader never trusts a file whose row is missing.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiwb.project.schema import SCHEMA_VERSION, migrate, refuse_if_newer, stored_version

if TYPE_CHECKING:
    from kiwb.project.jobs import Jobs

# A claim held by a process on another host cannot be checked for liveness; after this
# long without the shard finishing we assume that process is gone.
FOREIGN_CLAIM_TIMEOUT_S = 2 * 3600


def _proc_stat(pid: int) -> list[str] | None:
    """Fields 3 onwards of /proc/PID/stat (after the command name), None where unreadable."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid is running on this host (zombies count as ended)."""
    if not pid or pid <= 0:  # kill(0) would signal our own process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An exited child answers kill(0) until its parent reaps it; Linux shows it as state Z.
    stat = _proc_stat(pid)
    return stat is None or stat[0] != "Z"


def process_start(pid: int | None) -> str | None:
    """When a process started (Linux: clock ticks since boot), which tells it apart from a
    later process given the same pid; None where that cannot be read."""
    stat = _proc_stat(pid) if pid and pid > 0 else None
    return stat[19] if stat else None  # field 22; the fields start at 3


def process_running(pid: int | None, start: str | None) -> bool:
    """Whether the process recorded as (pid, start) still runs on this host; a process that
    was later given the same pid does not count."""
    if not pid_alive(pid):
        return False
    return start is None or process_start(pid) in (None, start)


class Store:
    """A connection to a project's SQLite store."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._migrate()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    @cached_property
    def jobs(self) -> Jobs:
        """Job records, lifecycle events, heartbeats and run locks."""
        from kiwb.project.jobs import Jobs  # jobs builds on this module

        return Jobs(self)

    def _migrate(self) -> None:
        """Bring an older store to SCHEMA_VERSION in place; refuse a newer one."""
        version = stored_version(self._db)
        if version == SCHEMA_VERSION:
            return  # the common case takes no write lock, so opening never waits on a writer
        refuse_if_newer(self.path, version)
        with self.transaction() as db:
            migrate(self.path, db)

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row["value"])

    # -- content-hash cache ------------------------------------------------------------
    def cached_hash(self, path: str, size: int, mtime_ns: int) -> str | None:
        """The recorded sha256 of a file if its size and mtime are unchanged."""
        row = self._db.execute(
            "SELECT sha256 FROM file_hashes WHERE path=? AND size=? AND mtime_ns=?",
            (path, size, mtime_ns),
        ).fetchone()
        return row["sha256"] if row else None

    def remember_hash(self, path: str, size: int, mtime_ns: int, sha256: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?)",
                (path, size, mtime_ns, sha256),
            )

    # -- score sets and shards ---------------------------------------------------------
    def register_score_set(
        self, key: str, *, teacher: str, dataset: str, num_texts: int, num_shards: int,
        meta: dict[str, Any],
    ) -> None:
        """Record a score set (idempotent: an existing key is left as it is)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO score_sets VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, teacher, dataset, num_texts, num_shards, json.dumps(meta), time.time()),
            )

    def score_set(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM score_sets WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        record = dict(row)
        record["meta"] = json.loads(record.pop("meta_json"))
        return record

    def done_shards(self, key: str) -> set[int]:
        rows = self._db.execute(
            "SELECT shard FROM score_shards WHERE score_key=? AND status='done'", (key,)
        )
        return {row["shard"] for row in rows}

    def claim_shard(self, key: str, shard: int, owner: str) -> bool:
        """Claim a shard for this process unless it is done or held by a live process."""
        host, pid, now = socket.gethostname(), os.getpid(), time.time()
        with self.transaction() as db:
            row = db.execute(
                "SELECT * FROM score_shards WHERE score_key=? AND shard=?", (key, shard)
            ).fetchone()
            if row is not None and not self._claim_is_free(row, owner, now):
                return False
            db.execute(
                "INSERT OR REPLACE INTO score_shards "
                "(score_key, shard, status, owner, pid, pid_start, host, claimed_at) "
                "VALUES (?, ?, 'claimed', ?, ?, ?, ?, ?)",
                (key, shard, owner, pid, process_start(pid), host, now),
            )
        return True

    @staticmethod
    def _claim_is_free(row: sqlite3.Row, owner: str, now: float) -> bool:
        if row["status"] == "done":
            return False
        if row["owner"] == owner:
            return True
        if row["host"] == socket.gethostname():
            return not process_running(row["pid"], row["pid_start"])
        return now - row["claimed_at"] > FOREIGN_CLAIM_TIMEOUT_S

    def finish_shard(self, key: str, shard: int, *, rows: int, seconds: float) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE score_shards SET status='done', finished_at=?, rows=?, seconds=? "
                "WHERE score_key=? AND shard=?",
                (time.time(), rows, seconds, key, shard),
            )

    def release_shard(self, key: str, shard: int, owner: str) -> None:
        """Give back an unfinished claim (on a clean stop), so others may take it at once."""
        with self.transaction() as db:
            db.execute(
                "DELETE FROM score_shards WHERE score_key=? AND shard=? AND owner=? "
                "AND status='claimed'",
                (key, shard, owner),
            )

    def record_integration(
        self, key: str, *, dataset: str, settings: dict[str, Any], summary: dict[str, Any]
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO integrations VALUES (?, ?, ?, ?, ?)",
                (key, dataset, json.dumps(settings), json.dumps(summary), time.time()),
            )

    def integration(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM integrations WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        return {
            "key": row["key"],
            "dataset": row["dataset"],
            "settings": json.loads(row["settings_json"]),
            "summary": json.loads(row["summary_json"]),
            "created_at": row["created_at"],
        }

    # -- events ------------------------------------------------------------------------
    def append_event(
        self, kind: str, data: dict[str, Any], job_id: int | None = None, run: str | None = None
    ) -> int:
        with self.transaction() as db:
            return insert_event(db, kind, data, job_id=job_id, run=run)

    def events_after(
        self, after_id: int = 0, *, job_id: int | None = None, run: str | None = None,
        kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """Events with id > after_id, oldest first, optionally of one job, run or kind."""
        query, params = "SELECT * FROM events WHERE id > ?", [after_id]
        for column, value in (("job_id", job_id), ("run", run), ("kind", kind)):
            if value is not None:
                query += f" AND {column} = ?"
                params.append(value)
        rows = self._db.execute(query + " ORDER BY id", params)
        return [
            {"id": r["id"], "job_id": r["job_id"], "run": r["run"], "ts": r["ts"],
             "kind": r["kind"], "data": json.loads(r["data_json"])}
            for r in rows
        ]


def insert_event(
    db: sqlite3.Connection, kind: str, data: dict[str, Any], *, job_id: int | None = None,
    run: str | None = None,
) -> int:
    """Append an event inside the caller's transaction; returns its id."""
    cursor = db.execute(
        "INSERT INTO events (job_id, run, ts, kind, data_json) VALUES (?, ?, ?, ?, ?)",
        (job_id, run, time.time(), kind, json.dumps(data)),
    )
    return int(cursor.lastrowid)
