"""Score sets and their shards in the store: which shards are finished, and the claims that
let independent scoring processes split one score set without scoring a text twice.

Per-text score arrays live beside the store as shard files; a reader trusts a shard file
only once its row here says `done`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from typing import Any

from kiwb.project.database import Database
from kiwb.project.processes import process_running, process_start
from kiwb.project.shard_files import ShardRecord

# A representation set (kiwb.workers.representation_sets: a teacher's representation of each
# text, for the representation routings) lives in the same tables as the score sets; its data
# set's name ends with this, and its meta says "holds": "representation".
REPRESENTATION_SUFFIX = " (representation)"
# SQL: the rows of score_sets that hold MC scores (not representations)
SCORES_ONLY = f"dataset NOT LIKE '%{REPRESENTATION_SUFFIX}'"

# A claim held by a process on another host cannot be checked for liveness; after this
# long without the shard finishing we assume that process is gone.
FOREIGN_CLAIM_TIMEOUT_S = 2 * 3600


def register_score_set(
    database: Database, key: str, *, teacher: str, dataset: str, num_texts: int,
    num_shards: int, meta: dict[str, Any],
) -> None:
    """Record a score set (idempotent: an existing key is left as it is)."""
    with database.transaction() as db:
        db.execute(
            "INSERT OR IGNORE INTO score_sets VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, teacher, dataset, num_texts, num_shards, json.dumps(meta), time.time()),
        )


def add_score_meta(database: Database, key: str, values: dict[str, Any]) -> None:
    """Add what was learnt of a score set while scoring it to its meta (the rest kept)."""
    with database.transaction() as db:
        row = db.execute("SELECT meta_json FROM score_sets WHERE key = ?", (key,)).fetchone()
        if row is not None:
            db.execute("UPDATE score_sets SET meta_json = ? WHERE key = ?",
                       (json.dumps({**json.loads(row[0]), **values}), key))


def score_set(db: sqlite3.Connection, key: str) -> dict[str, Any] | None:
    row = db.execute("SELECT * FROM score_sets WHERE key=?", (key,)).fetchone()
    if row is None:
        return None
    record = dict(row)
    record["meta"] = json.loads(record.pop("meta_json"))
    return record


def score_drawings(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """The drawings score sets were registered with (their meta's "drawing"), newest first,
    each once."""
    found: list[dict[str, Any]] = []
    rows = db.execute("SELECT meta_json FROM score_sets ORDER BY created_at DESC")
    for row in rows:
        drawing = json.loads(row["meta_json"]).get("drawing")
        if isinstance(drawing, dict) and drawing not in found:
            found.append(drawing)
    return found


def done_shards(db: sqlite3.Connection, key: str) -> set[int]:
    rows = db.execute("SELECT shard FROM score_shards WHERE score_key=? AND status='done'", (key,))
    return {row["shard"] for row in rows}


def claim_shard(database: Database, key: str, shard: int, owner: str) -> bool:
    """Claim a shard for this process unless it is done or held by a live process."""
    host, pid, now = socket.gethostname(), os.getpid(), time.time()
    with database.transaction() as db:
        row = db.execute(
            "SELECT * FROM score_shards WHERE score_key=? AND shard=?", (key, shard)
        ).fetchone()
        if row is not None and not _claim_is_free(row, owner, now):
            return False
        db.execute(
            "INSERT OR REPLACE INTO score_shards "
            "(score_key, shard, status, owner, pid, pid_start, host, claimed_at) "
            "VALUES (?, ?, 'claimed', ?, ?, ?, ?, ?)",
            (key, shard, owner, pid, process_start(pid), host, now),
        )
    return True


def _claim_is_free(row: sqlite3.Row, owner: str, now: float) -> bool:
    if row["status"] == "done":
        return False
    if row["owner"] == owner:
        return True
    if row["host"] == socket.gethostname():
        return not process_running(row["pid"], row["pid_start"])
    return now - row["claimed_at"] > FOREIGN_CLAIM_TIMEOUT_S


def finish_shard(database: Database, key: str, shard: int, *, rows: int, seconds: float,
                 row_start: int | None = None, size: int | None = None,
                 sha256: str | None = None) -> None:
    """Mark a claimed shard done, with what its file holds (its first row, its size and its
    SHA-256: kiwb.project.shard_files checks them when it is read)."""
    with database.transaction() as db:
        db.execute(
            "UPDATE score_shards SET status='done', finished_at=?, rows=?, seconds=?, "
            "row_start=?, bytes=?, sha256=? WHERE score_key=? AND shard=?",
            (time.time(), rows, seconds, row_start, size, sha256, key, shard),
        )


def shard_records(db: sqlite3.Connection, key: str) -> dict[int, ShardRecord]:
    """Every finished shard of a score set, by shard number."""
    rows = db.execute("SELECT shard, rows, row_start, bytes, sha256 FROM score_shards "
                      "WHERE score_key=? AND status='done'", (key,))
    return {row["shard"]: ShardRecord(row["shard"], row["rows"], row["row_start"], row["bytes"],
                                      row["sha256"]) for row in rows}


def record_file_check(database: Database, key: str, shard: int, *, row_start: int, size: int,
                      sha256: str) -> None:
    """What a shard written before version 8 holds, once its file passed the rows check."""
    with database.transaction() as db:
        db.execute("UPDATE score_shards SET row_start=?, bytes=?, sha256=? WHERE score_key=? "
                   "AND shard=? AND sha256 IS NULL", (row_start, size, sha256, key, shard))


def forget_shard(database: Database, key: str, shard: int) -> None:
    """A finished shard whose file is damaged: no longer done, so it is scored again."""
    with database.transaction() as db:
        db.execute("DELETE FROM score_shards WHERE score_key=? AND shard=? AND status='done'",
                   (key, shard))


def release_shard(database: Database, key: str, shard: int, owner: str) -> None:
    """Give back an unfinished claim (on a clean stop), so others may take it at once."""
    with database.transaction() as db:
        db.execute(
            "DELETE FROM score_shards WHERE score_key=? AND shard=? AND owner=? "
            "AND status='claimed'",
            (key, shard, owner),
        )
