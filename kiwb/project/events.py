"""The store's event log: one append-only table that every writer adds to and every reader
follows by id (training steps, scored shards, job lifecycles)."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any


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


def events_after(
    db: sqlite3.Connection, after_id: int = 0, *, job_id: int | None = None,
    run: str | None = None, kind: str | None = None,
) -> list[dict[str, Any]]:
    """Events with id > after_id, oldest first, optionally of one job, run or kind."""
    query, params = "SELECT * FROM events WHERE id > ?", [after_id]
    for column, value in (("job_id", job_id), ("run", run), ("kind", kind)):
        if value is not None:
            query += f" AND {column} = ?"
            params.append(value)
    rows = db.execute(query + " ORDER BY id", params)
    return [
        {"id": r["id"], "job_id": r["job_id"], "run": r["run"], "ts": r["ts"],
         "kind": r["kind"], "data": json.loads(r["data_json"])}
        for r in rows
    ]
