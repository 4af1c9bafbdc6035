"""The store's tables and the ordered migrations that build them, version by version."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError
from kiwb.project.labels import text_hash

# The tables of schema version 1, as the first kiwb release wrote them.
_V1_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS file_hashes (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS score_sets (
    key TEXT PRIMARY KEY,
    teacher TEXT NOT NULL,
    dataset TEXT NOT NULL,
    num_texts INTEGER NOT NULL,
    num_shards INTEGER NOT NULL,
    meta_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS score_shards (
    score_key TEXT NOT NULL REFERENCES score_sets(key),
    shard INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('claimed', 'done')),
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    finished_at REAL,
    rows INTEGER,
    seconds REAL,
    PRIMARY KEY (score_key, shard)
);
CREATE TABLE IF NOT EXISTS integrations (
    key TEXT PRIMARY KEY,
    dataset TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    summary_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER,
    run TEXT,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    data_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_id, id);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run, kind, id);
"""

# Version 2: background jobs. Their status is derived from `events` plus the heartbeat, so
# these tables hold only what does not change (jobs), one row updated in place per live
# job (heartbeats, to keep `events` small), and the single writer of each run (locks).
_V2_JOB_TABLES = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('score', 'train', 'export')),
    run TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    pid INTEGER,
    host TEXT,
    device TEXT,
    log_path TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL
);
CREATE TABLE heartbeats (job_id INTEGER PRIMARY KEY REFERENCES jobs(id), ts REAL NOT NULL);
CREATE TABLE locks (
    kind TEXT NOT NULL,
    run TEXT NOT NULL,
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    acquired_at REAL NOT NULL,
    PRIMARY KEY (kind, run)
);
"""


# Version 3: the start time of a job's or a shard claim's process beside its pid, so that a
# process later given the same pid is not taken for it.
_V3_PROCESS_STARTS = """
ALTER TABLE jobs ADD COLUMN pid_start TEXT;
ALTER TABLE score_shards ADD COLUMN pid_start TEXT
"""


# Version 4: per-text integration results (kiwb.project.instances), which older versions
# created on first use, so a store at version 3 may already hold them; and a jobs table that
# leaves the list of job kinds to kiwb.project.job_specs, so a new kind (integrate) needs no
# table rebuild. SQLite cannot drop a CHECK in place: the table is copied, ids and all.
_V4_INSTANCES = """
CREATE TABLE IF NOT EXISTS instances (
    integration TEXT NOT NULL,
    row INTEGER NOT NULL,
    margin REAL NOT NULL,
    routed INTEGER NOT NULL,
    target INTEGER NOT NULL,
    gold INTEGER,
    confidences TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (integration, row)
);
CREATE INDEX IF NOT EXISTS instances_by_margin ON instances (integration, margin, row)
"""
_V4_JOBS_ANY_KIND = """
CREATE TABLE jobs_v4 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    run TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    pid INTEGER,
    host TEXT,
    device TEXT,
    log_path TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    pid_start TEXT
);
INSERT INTO jobs_v4 (id, kind, run, settings_json, pid, host, device, log_path, created_at,
                     started_at, ended_at, pid_start)
    SELECT id, kind, run, settings_json, pid, host, device, log_path, created_at,
           started_at, ended_at, pid_start FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v4 RENAME TO jobs
"""


# Version 5: gold labels a user gives to texts (kiwb.project.labels), keyed by the text's
# content hash so they outlive any one integration or data file; and that hash on every
# integration row, so the conflicts list can tell labeled texts from the rest; and an index
# by (winning teacher, class) in margin order, which the "most useful next" order pages by.
_V5_LABELS = """
CREATE TABLE text_labels (
    text_hash TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    label TEXT,  -- NULL: none of the labels (the text is in no teacher's scope)
    given_at REAL NOT NULL,
    user TEXT NOT NULL,
    host TEXT NOT NULL
);
ALTER TABLE instances ADD COLUMN text_hash TEXT;
UPDATE instances SET text_hash = kiwb_text_hash(text);
CREATE INDEX instances_by_text ON instances (integration, text_hash);
CREATE INDEX instances_by_group ON instances (integration, routed, target, margin, row)
"""


def _run_script(db: sqlite3.Connection, script: str) -> None:
    # Statement by statement: executescript() would commit the migration's transaction.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _create_base_tables(db: sqlite3.Connection) -> None:
    _run_script(db, _V1_TABLES)


def _add_job_tables(db: sqlite3.Connection) -> None:
    _run_script(db, _V2_JOB_TABLES)


def _add_process_starts(db: sqlite3.Connection) -> None:
    _run_script(db, _V3_PROCESS_STARTS)


def _add_instances_and_free_job_kinds(db: sqlite3.Connection) -> None:
    _run_script(db, _V4_INSTANCES)
    # The sequence goes with the dropped table; carry it over, so that the id of a job
    # recorded once is never given to another (its events and log keep that id).
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name='jobs'").fetchone()
    _run_script(db, _V4_JOBS_ANY_KIND)
    if row is not None:
        db.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name='jobs'", (row[0],))
        db.execute("INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs', ? WHERE NOT EXISTS "
                   "(SELECT 1 FROM sqlite_sequence WHERE name='jobs')", (row[0],))


def _add_text_labels(db: sqlite3.Connection) -> None:
    db.create_function("kiwb_text_hash", 1, text_hash, deterministic=True)
    _run_script(db, _V5_LABELS)


# Version 6: keys of stored records renamed to say what they hold, rewritten in place so the
# records' readers know one spelling:
# - an integration summary's "task_kind" holds the teachers' kind: "teachers_kind";
# - a routing accuracy's "plain_entropy" holds the accuracy of routing by one plain pass's
#   confidence (beside "mc_dropout"), in a summary, its eval part and a train.eval event:
#   "plain_confidence".


def renamed_v6(record: Any, *, summary: bool = False) -> Any:
    """A record's JSON (an integration summary when `summary`, else any) under version 6's
    key names; what has none of the old keys comes back equal."""
    if isinstance(record, list):
        return [renamed_v6(item) for item in record]
    if not isinstance(record, dict):
        return record
    found = {key: renamed_v6(value) for key, value in record.items()}
    if summary and "task_kind" in found:
        found["teachers_kind"] = found.pop("task_kind")
    if "mc_dropout" in found and "plain_entropy" in found:  # a routing accuracy
        found["plain_confidence"] = found.pop("plain_entropy")
    return found


def _rename_record_keys(db: sqlite3.Connection) -> None:
    for table, column, key_column, as_summary in (("integrations", "summary_json", "key", True),
                                                  ("events", "data_json", "id", False)):
        rows = db.execute(f"SELECT {key_column}, {column} FROM {table} "
                          f"WHERE {column} LIKE '%plain_entropy%' OR {column} LIKE '%task_kind%'")
        for key, text in rows.fetchall():
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {key_column} = ?",
                       (json.dumps(renamed_v6(json.loads(text), summary=as_summary)), key))


# Ordered (version, step): each step brings a store at the previous version to `version`.
# Never edit a released step; append a new one.
MIGRATIONS: tuple[tuple[int, Callable[[sqlite3.Connection], None]], ...] = (
    (1, _create_base_tables),
    (2, _add_job_tables),
    (3, _add_process_starts),
    (4, _add_instances_and_free_job_kinds),
    (5, _add_text_labels),
    (6, _rename_record_keys),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def stored_version(db: sqlite3.Connection) -> int:
    """The schema version recorded in a store; 0 for an empty file."""
    has_meta = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    row = has_meta and db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def refuse_if_newer(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise KiwbError(
            f"{path}: store schema version {version} is newer than this kiwb understands "
            f"({SCHEMA_VERSION}); upgrade kiwb to open this project"
        )


def migrate(path: Path, db: sqlite3.Connection) -> None:
    """Run the missing migration steps inside the caller's write transaction."""
    version = stored_version(db)  # read again under the lock: another process may have migrated
    refuse_if_newer(path, version)
    for target, step in MIGRATIONS:
        if target > version:
            step(db)
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
