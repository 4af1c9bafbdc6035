"""The store's tables and the ordered migrations that build them, version by version."""

from __future__ import annotations

import json
import sqlite3
import time
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


# Version 7: records as this release writes them. Keys that integration records gained after
# the first release are written into older ones with what those meant, so the records'
# readers hold no defaults for history:
# - settings (and run manifests, which are files: kiwb.workers.checkpoints reads them through
#   `completed_settings`): before routing was a choice MUKI compared raw confidences; before
#   given labels and rare classes, neither was used;
# - summaries: the teachers in the order of their wins; the sequence kind, whose summaries named
#   no kind until this version; the score sets read, which the first release did not record:
#   each teacher's newest complete unlabeled score set of the integration's size made before it;
#   each sequence teacher's labels, which it did not record either: those of that score set
#   (else of the teacher's newest);
# - summaries' routing details: no use_mc, which only repeated the settings';
# - score sets' meta: the sequence kind, which it named only for other kinds until this version;
# - train.eval events: the name of the headline figure their "accuracy" holds ("metric"), told
#   by what each kind's evaluation held beside it: entity figures (token), tasks (multi-task),
#   probes (embedding), a Hamming loss (multi-label), else none (sequence: accuracy);
# - process starts that kiwb before psutil wrote as clock ticks since boot (digits, no decimal
#   point), which no time since the epoch can be compared with: unknown (NULL), as where none
#   was recorded, so the pid alone decides and a live worker is never taken for a lost one.
SETTINGS_BEFORE_V7 = {"routing": "confidence", "labels": False, "class_weighting": 0.0}
SEQUENCE_KIND = "sequence"  # kiwb.kinds' default kind, which the store may not import


def completed_settings(settings: dict) -> dict:
    """Integration settings as version 7 stores them: a key an older record lacks, added with
    what that record meant."""
    return {**SETTINGS_BEFORE_V7, **settings}


def _complete_records(db: sqlite3.Connection) -> None:
    rows = db.execute("SELECT key, settings_json, summary_json, created_at FROM integrations")
    for key, settings_text, summary_text, created_at in rows.fetchall():
        settings, summary = json.loads(settings_text), json.loads(summary_text)
        summary.setdefault("teachers", list(summary.get("wins", {})))
        summary.setdefault("teachers_kind", SEQUENCE_KIND)
        if "score_keys" not in summary:
            found = {teacher: _score_set_before(db, teacher, summary.get("num_texts"), created_at)
                     for teacher in summary["teachers"]}
            summary["score_keys"] = {teacher: key for teacher, key in found.items() if key}
        (summary.get("routing") or {}).pop("use_mc", None)
        if "teacher_labels" not in summary and summary["teachers_kind"] == SEQUENCE_KIND:
            summary["teacher_labels"] = {teacher: _scored_labels(
                db, teacher, summary["score_keys"].get(teacher)) for teacher in summary["teachers"]}
        db.execute("UPDATE integrations SET settings_json = ?, summary_json = ? WHERE key = ?",
                   (json.dumps(completed_settings(settings)), json.dumps(summary), key))
    for event, text in db.execute(
            "SELECT id, data_json FROM events WHERE kind = 'train.eval'").fetchall():
        data = json.loads(text)
        if "metric" not in data:
            db.execute("UPDATE events SET data_json = ? WHERE id = ?",
                       (json.dumps({**data, "metric": _headline_name(data)}), event))
    for table in ("jobs", "score_shards"):
        db.execute(f"UPDATE {table} SET pid_start = NULL WHERE pid_start NOT LIKE '%.%'")
    for key, meta in db.execute("SELECT key, meta_json FROM score_sets "
                                "WHERE dataset NOT LIKE '% (representation)'").fetchall():
        if "kind" not in json.loads(meta):
            db.execute("UPDATE score_sets SET meta_json = ? WHERE key = ?",
                       (json.dumps({**json.loads(meta), "kind": SEQUENCE_KIND}), key))


def _score_set_before(db: sqlite3.Connection, teacher: str, num_texts: int | None,
                      before: float) -> str | None:
    """The teacher's newest complete unlabeled score set of `num_texts` texts made before
    `before` (else the newest made after): the one the first release's integrations read."""
    row = db.execute(
        "SELECT s.key FROM score_sets s WHERE s.teacher = ? AND s.dataset = 'unlabeled' "
        "AND s.num_texts = ? AND s.num_shards = (SELECT COUNT(*) FROM score_shards d "
        "WHERE d.score_key = s.key AND d.status = 'done') "
        "ORDER BY (s.created_at <= ?) DESC, s.created_at DESC", (teacher, num_texts, before))
    found = row.fetchone()
    return found[0] if found else None


def _headline_name(evaluation: dict) -> str:
    """What a train.eval event's "accuracy" held, by the figures its kind's evaluation kept."""
    details = evaluation.get("details") or {}
    if evaluation.get("entity"):
        return "entity F1"
    if "tasks" in details:
        return "mean task score"
    if "probes" in details:
        return "probe score"
    if "hamming_loss" in details:
        return "micro F1"
    return "accuracy"


def _scored_labels(db: sqlite3.Connection, teacher: str, key: str | None) -> list[str]:
    """The labels the score set `key` recorded, else the teacher's newest score set's (not a
    representation set: those record none)."""
    row = db.execute("SELECT meta_json FROM score_sets WHERE key = ? OR (? IS NULL AND "
                     "teacher = ? AND dataset NOT LIKE '% (representation)') "
                     "ORDER BY created_at DESC", (key, key, teacher)).fetchone()
    return json.loads(row[0]).get("labels", []) if row else []


# Version 8: what each shard file holds, recorded as it is written and checked whenever it is
# read (kiwb.project.shard_files): its first row, its size and its SHA-256. Shards written
# before have none, and are checked by the rows they hold. And the history of the labels given
# to texts (kiwb.project.labels): every set of labels a change replaced, restorable.
_V8_SHARD_COLUMNS = (("row_start", "INTEGER"), ("bytes", "INTEGER"), ("sha256", "TEXT"))
_V8_LABEL_HISTORY = """
CREATE TABLE IF NOT EXISTS label_sets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    taken_at REAL NOT NULL,
    reason TEXT NOT NULL,  -- what replaced it: "kiwb labels import --replace", ...
    user TEXT NOT NULL,
    host TEXT NOT NULL,
    labels INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS label_set_rows (
    set_id INTEGER NOT NULL REFERENCES label_sets(id),
    text_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    label TEXT,
    given_at REAL NOT NULL,
    user TEXT NOT NULL,
    host TEXT NOT NULL,
    PRIMARY KEY (set_id, text_hash)
)
"""


def _add_shard_checks_and_label_history(db: sqlite3.Connection) -> None:
    # a store copied back to an older version number may have them: added where missing
    present = {row[1] for row in db.execute("PRAGMA table_info(score_shards)")}
    for name, kind in _V8_SHARD_COLUMNS:
        if name not in present:
            db.execute(f"ALTER TABLE score_shards ADD COLUMN {name} {kind}")
    _run_script(db, _V8_LABEL_HISTORY)


def _name_the_routing_once(db: sqlite3.Connection) -> None:
    """Version 9: a routing accuracy no longer names the routing it measured. An integration
    names it in its routing details; a run in its train.start event, taken here from the first
    evaluation that named it (a resumed run's later starts too)."""
    def unnamed(accuracy: Any) -> Any:
        if isinstance(accuracy, dict):
            accuracy.pop("routing", None)
        return accuracy

    for key, text in db.execute("SELECT key, summary_json FROM integrations").fetchall():
        summary = json.loads(text)
        task_summaries = [task.get("summary") or {} for task in
                          ((summary.get("details") or {}).get("tasks") or {}).values()
                          if isinstance(task, dict)]  # a multi-task integration's own tasks'
        for found in (summary, *task_summaries):
            unnamed(found.get("routing_accuracy"))
            unnamed((found.get("eval") or {}).get("routing_accuracy"))
        db.execute("UPDATE integrations SET summary_json = ? WHERE key = ?",
                   (json.dumps(summary), key))
    # each train.start is named by the first evaluation after it that named the routing
    waiting: dict[str, tuple[int, dict]] = {}  # run -> its latest start, not named yet
    for event, run, kind, text in db.execute(
            "SELECT id, run, kind, data_json FROM events "
            "WHERE kind IN ('train.start', 'train.eval') ORDER BY id").fetchall():
        data = json.loads(text)
        if kind == "train.start":
            waiting[run] = (event, data)
            continue
        accuracy = data.get("routing_accuracy")
        name = accuracy.pop("routing", None) if isinstance(accuracy, dict) else None
        if name is None:
            continue
        db.execute("UPDATE events SET data_json = ? WHERE id = ?", (json.dumps(data), event))
        if run in waiting:
            start, started = waiting.pop(run)
            db.execute("UPDATE events SET data_json = ? WHERE id = ?",
                       (json.dumps({"routing": name, **started}), start))


# what a summary held per teacher before version 10, as the TeacherFacts key that holds it now
_V10_TEACHER_FACTS = {"score_keys": "score_key", "wins": "wins", "teacher_labels": "labels",
                      "teacher_accuracy": "accuracy", "teacher_dropout": "dropout"}
# what a summary's details held per teacher before version 10, as the key of the teacher's
# `own` that holds it now (records.OWN_DETAILS; a released step keeps its own copy)
_V10_OWN_DETAILS = {"widths": "width", "coverage": "coverage",
                    "dispersion_median": "dispersion_median",
                    "stability_histograms": "stability_histogram",
                    "label_histograms": "label_histograms"}


def per_teacher_of(summary: dict) -> dict:
    """A summary as version 10 stores it: its per-teacher mappings (teachers, score_keys, wins,
    teacher_labels, teacher_accuracy, teacher_dropout, the routing details' teachers less the
    `won` that repeated wins, and what its kind's details held per teacher) folded into one
    record per teacher, `per_teacher`, in the teachers' order; a multi-task integration's own
    tasks' too."""
    tasks = (summary.get("details") or {}).get("tasks") or {}
    for task in tasks.values():
        if isinstance(task, dict) and isinstance(task.get("summary"), dict):
            task["summary"] = per_teacher_of(task["summary"])
    if "per_teacher" in summary:
        return summary
    mappings = {fact: summary.pop(old, None) or {} for old, fact in _V10_TEACHER_FACTS.items()}
    routing = summary.get("routing")
    if isinstance(routing, dict):
        mappings["routing"] = {name: {key: value for key, value in found.items() if key != "won"}
                               for name, found in (routing.pop("teachers", None) or {}).items()}
    details = summary.get("details")
    if isinstance(details, dict):  # what only its kind recorded per teacher
        owned = {_V10_OWN_DETAILS[detail]: details.pop(detail) for detail in list(details)
                 if detail in _V10_OWN_DETAILS and isinstance(details[detail], dict)}
        mappings["own"] = {name: {own: values[name] for own, values in owned.items()
                                  if name in values}
                           for name in {name for values in owned.values() for name in values}}
    teachers = summary.pop("teachers", None) or list(mappings["wins"])
    summary["per_teacher"] = [
        {"name": name, "wins": int(mappings["wins"].get(name, 0)),
         **{fact: found[name] for fact, found in mappings.items()
            if fact != "wins" and found.get(name) is not None}}
        for name in teachers]
    return summary


def _one_record_per_teacher(db: sqlite3.Connection) -> None:
    """Version 10: an integration's summary keeps each teacher's facts in one record."""
    for key, text in db.execute("SELECT key, summary_json FROM integrations").fetchall():
        db.execute("UPDATE integrations SET summary_json = ? WHERE key = ?",
                   (json.dumps(per_teacher_of(json.loads(text))), key))


# Ordered (version, step): each step brings a store at the previous version to `version`.
# Never edit a released step; append a new one.
MIGRATIONS: tuple[tuple[int, Callable[[sqlite3.Connection], None]], ...] = (
    (1, _create_base_tables),
    (2, _add_job_tables),
    (3, _add_process_starts),
    (4, _add_instances_and_free_job_kinds),
    (5, _add_text_labels),
    (6, _rename_record_keys),
    (7, _complete_records),
    (8, _add_shard_checks_and_label_history),
    (9, _name_the_routing_once),
    (10, _one_record_per_teacher),
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


# A heartbeat this fresh is a running worker (kiwb.project.jobs beats every 2 s, and takes one
# older than 10 s for a lost job).
LIVE_HEARTBEAT_S = 10.0


def refuse_under_running_jobs(path: Path, db: sqlite3.Connection, version: int) -> None:
    """A worker of the kiwb that wrote the store still writes its records as that kiwb did:
    a migration under it would leave records in the old form after it (version 2 added jobs)."""
    if version < 2:
        return
    running = [row[0] for row in db.execute(
        "SELECT h.job_id FROM heartbeats h JOIN jobs j ON j.id = h.job_id "
        "WHERE j.ended_at IS NULL AND h.ts > ? ORDER BY h.job_id",
        (time.time() - LIVE_HEARTBEAT_S,))]
    if running:
        raise KiwbError(
            f"{path}: job(s) {', '.join(map(str, running))} of the kiwb that wrote this store "
            f"(schema version {version}) are still running, and this kiwb would rewrite the "
            f"store's records (version {SCHEMA_VERSION}) under them; let them finish, or stop "
            "them with that kiwb, then open the project again")


def migrate(path: Path, db: sqlite3.Connection) -> None:
    """Run the missing migration steps inside the caller's write transaction."""
    version = stored_version(db)  # read again under the lock: another process may have migrated
    refuse_if_newer(path, version)
    refuse_under_running_jobs(path, db, version)
    for target, step in MIGRATIONS:
        if target > version:
            step(db)
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
