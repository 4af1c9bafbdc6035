"""The project store: migrations, process liveness, job status derived from events and
heartbeats, run locks, and a reader that sees a writing process's events as they come. No
torch here: seconds."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import Deadline, wait_until

from kiwb.errors import KiwbError
from kiwb.project.instances import count, page, replace_instances
from kiwb.project.jobs import HEARTBEAT_STALE_S, JobConflict, derive_status
from kiwb.project.labels import text_hash
from kiwb.project.processes import pid_alive, process_running, process_start, with_this_kiwb
from kiwb.project.records import LEGACY_VIEWS, IntegrationSummary
from kiwb.project.schema import MIGRATIONS, SCHEMA_VERSION, stored_version
from kiwb.project.store import Store

# Schema version 1 exactly as the first release wrote it; never edit (migrations start here).
V1_DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE file_hashes (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL
);
CREATE TABLE score_sets (
    key TEXT PRIMARY KEY, teacher TEXT NOT NULL, dataset TEXT NOT NULL,
    num_texts INTEGER NOT NULL, num_shards INTEGER NOT NULL, meta_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE score_shards (
    score_key TEXT NOT NULL REFERENCES score_sets(key), shard INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('claimed', 'done')), owner TEXT NOT NULL,
    pid INTEGER NOT NULL, host TEXT NOT NULL, claimed_at REAL NOT NULL, finished_at REAL,
    rows INTEGER, seconds REAL, PRIMARY KEY (score_key, shard)
);
CREATE TABLE integrations (
    key TEXT PRIMARY KEY, dataset TEXT NOT NULL, settings_json TEXT NOT NULL,
    summary_json TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER, run TEXT, ts REAL NOT NULL,
    kind TEXT NOT NULL, data_json TEXT NOT NULL
);
CREATE INDEX events_by_job ON events (job_id, id);
CREATE INDEX events_by_run ON events (run, kind, id);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO score_sets VALUES ('k1', 'a', 'unlabeled', 10, 1, '{"labels": ["x"]}', 1.0);
INSERT INTO score_shards VALUES ('k1', 0, 'done', 'o', 1, 'h', 1.0, 2.0, 10, 0.5);
INSERT INTO events (job_id, run, ts, kind, data_json) VALUES (NULL, 'r', 1.0, 'train.step', '{"step": 1}');
"""

# What versions 2 and 3 added, exactly as they wrote it (never edit), and a v3 store's data:
# two jobs, the second still running in this process as an older kiwb recorded it (its start
# in clock ticks since boot), a sequence past both ids, and the `instances` table that kiwb
# before version 4 created on first use.
V3_DDL = V1_DDL.replace("VALUES ('schema_version', '1')", "VALUES ('schema_version', '3')") + """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('score', 'train', 'export')),
    run TEXT NOT NULL, settings_json TEXT NOT NULL, pid INTEGER, host TEXT, device TEXT,
    log_path TEXT, created_at REAL NOT NULL, started_at REAL, ended_at REAL
);
CREATE TABLE heartbeats (job_id INTEGER PRIMARY KEY REFERENCES jobs(id), ts REAL NOT NULL);
CREATE TABLE locks (
    kind TEXT NOT NULL, run TEXT NOT NULL, job_id INTEGER NOT NULL REFERENCES jobs(id),
    acquired_at REAL NOT NULL, PRIMARY KEY (kind, run)
);
ALTER TABLE jobs ADD COLUMN pid_start TEXT;
ALTER TABLE score_shards ADD COLUMN pid_start TEXT;
CREATE TABLE IF NOT EXISTS instances (
    integration TEXT NOT NULL, row INTEGER NOT NULL, margin REAL NOT NULL,
    routed INTEGER NOT NULL, target INTEGER NOT NULL, gold INTEGER, confidences TEXT NOT NULL,
    text TEXT NOT NULL, PRIMARY KEY (integration, row)
);
CREATE INDEX IF NOT EXISTS instances_by_margin ON instances (integration, margin, row);
INSERT INTO instances VALUES ('i1', 0, 0.25, 1, 2, NULL, '[0.5, 0.25]', 'kept text');
INSERT INTO jobs (id, kind, run, settings_json, created_at, ended_at)
    VALUES (1, 'score', 'scores', '{}', 1.0, 2.0);
INSERT INTO events (job_id, run, ts, kind, data_json)
    VALUES (1, 'scores', 2.0, 'job.finished', '{}');
INSERT INTO jobs (id, kind, run, settings_json, pid, host, pid_start, created_at, started_at)
    VALUES (2, 'train', 'r', '{}', :pid, :host, '123456', 3.0, 3.0);
INSERT INTO events (job_id, run, ts, kind, data_json) VALUES (2, 'r', 3.0, 'job.started', '{}');
INSERT INTO heartbeats VALUES (2, :now);
INSERT INTO locks VALUES ('train', 'r', 2, 3.0);
UPDATE sqlite_sequence SET seq = 7 WHERE name = 'jobs';
"""


def test_a_v1_store_is_migrated_in_place(tmp_path):
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(V1_DDL)
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 10
        assert store.done_shards("k1") == {0}  # v1 data kept
        assert store.claim_shard("k1", 1, owner="o2")  # v3's process start time is written
        # v7 names the kind its meta named only for kinds other than sequence
        assert store.score_set("k1")["meta"] == {"labels": ["x"], "kind": "sequence"}
        # v8: a shard written before holds no file check (its rows are checked instead), and
        # the label history is there, empty
        record = store.shard_records("k1")[0]
        assert (record.row_start, record.bytes, record.sha256) == (None, None, None)
        assert store.connection.execute("SELECT COUNT(*) FROM label_sets").fetchone()[0] == 0
        job = store.jobs.create("train", "r", {"epochs": 1})
        assert store.jobs.get(job).status == "queued"
        ids = [event["id"] for event in store.events_after(0)]
        assert ids == sorted(ids) and len(ids) == 2  # the old event, then job.queued
    with Store(path) as again:  # opening a current store changes nothing
        assert again.schema_version == SCHEMA_VERSION
        assert [job.id for job in again.jobs.all()] == [1]


def test_a_v5_store_has_its_records_renamed_keys_rewritten(tmp_path):
    """Version 6 renamed two keys of stored records: a summary's task_kind (it holds the teachers'
    kind) and a routing accuracy's plain_entropy (a plain pass's confidence). A store written
    before holds the old keys in integration summaries and train.eval events."""
    path = tmp_path / "store.sqlite"
    older_summary = {"task_kind": "token", "num_texts": 3,
                     "routing": {"name": "rank", "use_mc": True, "labeled_texts": 0, "teachers": {}},
                     "routing_accuracy": {"mc_dropout": 0.9, "plain_entropy": 0.7},
                     "eval": {"routing_accuracy": {"mc_dropout": 0.8, "plain_entropy": 0.6}}}
    older_eval = {"step": 5, "routing_accuracy": {"mc_dropout": 0.5, "plain_entropy": 0.25},
                  "settings": {"task_kind": "kept: not a summary's key"}}
    with sqlite3.connect(path) as db:
        db.executescript(V1_DDL.replace("VALUES ('schema_version', '1')",
                                        "VALUES ('schema_version', '5')"))
        for migrate_step in (2, 3, 4, 5):  # the tables versions 2 to 5 added, as they built them
            dict(MIGRATIONS)[migrate_step](db)
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        db.execute("INSERT INTO integrations VALUES ('i', 'unlabeled', '{}', ?, 1.0)",
                   (json.dumps(older_summary),))
        for data in (older_eval, {"step": 6, "entity": {"f1": 0.5}},
                     {"step": 7, "details": {"hamming_loss": 0.1}},
                     {"step": 8, "details": {"tasks": {}}}, {"step": 9, "details": {"probes": {}}},
                     {"step": 10, "metric": "micro F1"}):  # the last one named its own
            db.execute("INSERT INTO events (job_id, run, ts, kind, data_json) "
                       "VALUES (NULL, 'r', 2.0, 'train.eval', ?)", (json.dumps(data),))
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 10
        summary = store.integration("i")["summary"]
        assert summary == {"teachers_kind": "token", "num_texts": 3,
                           # v7: no use_mc in the routing details, which repeated the settings'
                           # (v10: what it found per teacher is in per_teacher)
                           "routing": {"name": "rank", "labeled_texts": 0},
                           "per_teacher": [],  # (v7: no wins, so no teachers to look up)
                           "routing_accuracy": {"mc_dropout": 0.9, "plain_confidence": 0.7},
                           "eval": {"routing_accuracy": {"mc_dropout": 0.8,
                                                         "plain_confidence": 0.6}}}
        event, *named = [e["data"] for e in store.events_after(0) if e["kind"] == "train.eval"]
        assert event == {"step": 5,
                         "routing_accuracy": {"mc_dropout": 0.5, "plain_confidence": 0.25},
                         "settings": {"task_kind": "kept: not a summary's key"},
                         "metric": "accuracy"}  # v7: the headline's name, by what it held
        assert [data["metric"] for data in named] == [
            "entity F1", "micro F1", "mean task score", "probe score", "micro F1"]
        assert store.done_shards("k1") == {0}  # the rest untouched


def _store_at_version(path, version: int, summary: dict) -> None:
    """A store as `version` built it, holding one integration ('i') of `summary`: the next open
    migrates it."""
    with sqlite3.connect(path) as db:
        db.executescript(V1_DDL)
        for _, step in MIGRATIONS[1:version]:
            step(db)
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        db.execute("INSERT INTO integrations VALUES ('i', 'unlabeled', '{}', ?, 1.0)",
                   (json.dumps(summary),))


def test_a_v8_store_names_each_routing_once(tmp_path):
    """Version 9: a routing accuracy no longer names its routing. An integration names it in
    its routing details (a multi-task one's tasks too); a run in its train.start, taken from
    the first evaluation after each start that named it."""
    path = tmp_path / "store.sqlite"
    accuracy = {"mc_dropout": 0.9, "plain_confidence": 0.7, "chosen": 0.95, "routing": "rank"}
    task = {"summary": {"routing_accuracy": dict(accuracy),
                        "eval": {"routing_accuracy": dict(accuracy)}}}
    summary = {"routing": {"name": "rank"}, "routing_accuracy": dict(accuracy),
               "eval": {"routing_accuracy": dict(accuracy)}, "details": {"tasks": {"t": task}}}
    events = [("a", "train.start", {"step": 0}), ("b", "train.start", {"step": 0}),
              ("a", "train.eval", {"step": 5, "routing_accuracy": dict(accuracy)}),
              ("a", "train.eval", {"step": 9, "routing_accuracy": dict(accuracy)}),
              ("a", "train.start", {"step": 9}),  # resumed: named by what follows it
              ("a", "train.eval", {"step": 12, "routing_accuracy": {**accuracy,
                                                                    "routing": "stacked"}}),
              ("b", "train.eval", {"step": 5, "routing_accuracy": {"mc_dropout": 0.5,
                                                                   "plain_confidence": 0.4}})]
    _store_at_version(path, 8, summary)
    with sqlite3.connect(path) as db:
        for run, kind, data in events:
            db.execute("INSERT INTO events (job_id, run, ts, kind, data_json) "
                       "VALUES (NULL, ?, 2.0, ?, ?)", (run, kind, json.dumps(data)))
    unnamed = {"mc_dropout": 0.9, "plain_confidence": 0.7, "chosen": 0.95}
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 10
        found = store.integration("i")["summary"]
        assert found["routing"] == {"name": "rank"}
        assert found["routing_accuracy"] == found["eval"]["routing_accuracy"] == unnamed
        assert found["details"]["tasks"]["t"]["summary"] == {
            "routing_accuracy": unnamed, "eval": {"routing_accuracy": unnamed},
            "per_teacher": []}  # (v10: it named no teachers)
        stored = [(e["run"], e["kind"], e["data"]) for e in store.events_after(0)]
    assert [(run, data.get("routing")) for run, kind, data in stored if kind == "train.start"] == [
        ("a", "rank"), ("b", None), ("a", "stacked")]
    assert all("routing" not in data.get("routing_accuracy", {}) for _, _, data in stored)


HISTOGRAMS = {"histogram_here": [1, 0], "histogram_elsewhere": [0, 1]}


def test_a_v9_store_keeps_each_teachers_facts_in_one_record(tmp_path):
    """Version 10: an integration's per-teacher mappings (teachers, score_keys, wins,
    teacher_labels, teacher_accuracy, teacher_dropout, the routing details' teachers) become one
    record per teacher, in the teachers' order, a multi-task integration's tasks' too; what
    they read back is unchanged."""
    path = tmp_path / "store.sqlite"
    older = {"num_texts": 10, "teachers": ["b", "a"], "score_keys": {"b": "kb", "a": "ka"},
             "wins": {"a": 4, "b": 6}, "teacher_labels": {"b": ["x"], "a": ["y", "z"]},
             "teacher_accuracy": {"a": 0.5, "b": 0.75},
             "teacher_dropout": {"a": {"acts": True}},  # b's score set was scored before checks
             "routing": {"name": "rank", "labeled_texts": 0,
                         "teachers": {"a": {"won": 4, "share": 0.4, "split": 0.5, **HISTOGRAMS},
                                      "b": {"won": 6, "share": None, "split": None,
                                            **HISTOGRAMS}}},
             "labels": ["x", "y", "z"], "overlapping_labels": [], "margin_quantiles": {},
             "margin_histogram": [], "conflict_threshold": 0.1, "conflicts": 1,
             "teachers_kind": "multi-task",
             # what only a kind recorded per teacher: an encoder's, a multi-label task's
             "details": {"coverage": {"a": 0.5, "b": 1.0}, "widths": {"a": 8}, "pairs": 2,
                         "tasks": {"t": {"summary": {
                             "teachers": ["a"], "wins": {"a": 3},
                             "details": {"label_histograms": {"a": {"x": [1, 2]}}}}}}}}
    _store_at_version(path, 9, older)
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 10
        found = store.integration("i")["summary"]
    assert found["per_teacher"] == [  # the routing's estimates less `won`, which repeated wins
        {"name": "b", "wins": 6, "score_key": "kb", "labels": ["x"], "accuracy": 0.75,
         "routing": {"share": None, "split": None, **HISTOGRAMS}, "own": {"coverage": 1.0}},
        {"name": "a", "wins": 4, "score_key": "ka", "labels": ["y", "z"], "accuracy": 0.5,
         "dropout": {"acts": True}, "routing": {"share": 0.4, "split": 0.5, **HISTOGRAMS},
         "own": {"coverage": 0.5, "width": 8}}]
    assert found["routing"] == {"name": "rank", "labeled_texts": 0}
    assert found["details"]["tasks"]["t"]["summary"] == {"details": {}, "per_teacher": [
        {"name": "a", "wins": 3, "own": {"label_histograms": {"x": [1, 2]}}}]}
    assert set(found["details"]) == {"pairs", "tasks"}
    summary = IntegrationSummary.from_dict(found)
    assert not set(LEGACY_VIEWS) & set(found)  # each fact is kept once
    for view in LEGACY_VIEWS:  # and reads back as it was stored before
        assert getattr(summary, view) == older[view], view
    printed = summary.printed()
    assert printed["routing"] == older["routing"]
    assert {key: printed["details"][key] for key in ("coverage", "widths")} == {
        key: older["details"][key] for key in ("coverage", "widths")}
    assert printed["deprecated"] == {  # named for scripts, which go to per_teacher
        "keys": [*LEGACY_VIEWS, "routing.teachers", "details.widths", "details.coverage"],
        "removed_in": "kiwb 0.3", "read_instead": "per_teacher"}


def test_a_v3_store_gets_instances_and_jobs_of_any_kind(tmp_path):
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as db:
        for statement in V3_DDL.split(";"):
            if statement.strip():
                db.execute(statement, {"pid": os.getpid(), "host": socket.gethostname(),
                                       "now": time.time()})
    # job 2 beats: a worker of the older kiwb still writing, so the store is not migrated
    with pytest.raises(KiwbError, match=r"job\(s\) 2 of the kiwb that wrote this store "
                                        r"\(schema version 3\) are still running"):
        Store(path)
    with sqlite3.connect(path) as db:
        assert stored_version(db) == 3
        db.execute("UPDATE heartbeats SET ts = ?", (time.time() - 60,))  # it stopped beating
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert [(row.id, row.kind, row.status) for row in store.jobs.all()] == [
            (1, "score", "finished"), (2, "train", "stalled")]  # its pid runs: not taken for lost
        # version 7 made the tick strings unknown: the pid alone decides
        starts = store.connection.execute("SELECT pid_start FROM jobs UNION ALL "
                                          "SELECT pid_start FROM score_shards").fetchall()
        assert {row[0] for row in starts} == {None}
        with pytest.raises(JobConflict, match="job 2 "):
            store.jobs.create("train", "r", {})
        assert store.jobs.create("train", "other", {}) == 8  # no recorded id is given again
        store.connection.execute(  # the kinds are kiwb.project.job_specs' to decide now
            "INSERT INTO jobs (kind, run, settings_json, created_at) VALUES ('integrate', 'x', '{}', 1)")
        kept = page(store.connection, "i1")[0]
        assert kept.text == "kept text" and kept.text_hash == text_hash("kept text")  # v5
        replace_instances(store.connection, "i2", [(0, 0.5, 0, 1, 1, [0.5, 0.5], "new text")])
        assert count(store.connection, "i2") == 1


def test_a_new_store_has_every_table_from_the_start(tmp_path):
    with Store(tmp_path / "store.sqlite") as store:
        assert count(store.connection, "none") == 0 and page(store.connection, "none") == []


def test_a_new_store_waits_for_another_process_that_holds_its_first_lock(tmp_path):
    # Two jobs opening a brand-new project together: SQLite refuses the switch to WAL at once
    # (no busy wait) while the other holds a lock on the file still in rollback mode.
    path = tmp_path / "store.sqlite"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE other_process_was_here (x)")
    opened = {}

    def open_store():
        with Store(path) as store:
            opened["mode"] = store.connection.execute("PRAGMA journal_mode").fetchone()[0]
            opened["version"] = stored_version(store.connection)

    opener = threading.Thread(target=open_store)
    opener.start()
    opener.join(timeout=0.5)
    assert opener.is_alive() and not opened  # it waits for the lock, it does not fail
    other.execute("COMMIT")
    other.close()
    opener.join(timeout=30)
    assert opened == {"mode": "wal", "version": SCHEMA_VERSION}


def test_a_newer_store_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "store.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(KiwbError, match=rf"schema version {SCHEMA_VERSION + 1} is newer .*upgrade kiwb"):
        Store(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION + 1)


@pytest.mark.parametrize(("lifecycle", "heartbeat_age", "alive", "created_age", "expected"), [
    (["job.queued"], None, None, 1.0, "queued"),
    (["job.queued"], None, None, HEARTBEAT_STALE_S + 1, "lost"),  # launcher died before the worker
    (["job.queued"], None, False, 1.0, "lost"),  # worker died before its first heartbeat
    (["job.queued", "job.started"], 1.0, True, 60.0, "running"),
    (["job.queued", "job.started"], 1.0, None, 60.0, "running"),  # another host, fresh beat
    (["job.queued", "job.started"], 1.0, False, 60.0, "lost"),  # killed: the pid tells at once
    (["job.queued", "job.started"], HEARTBEAT_STALE_S + 1, None, 60.0, "lost"),
    (["job.queued", "job.started"], HEARTBEAT_STALE_S + 1, True, 60.0, "stalled"),  # its process runs on
    (["job.queued", "job.started"], HEARTBEAT_STALE_S + 1, False, 60.0, "lost"),  # dead, or its pid reused
    (["job.queued", "job.started", "job.cancel_requested"], 1.0, True, 60.0, "cancelling"),
    (["job.queued", "job.started", "job.finished"], 500.0, False, 600.0, "finished"),
    (["job.queued", "job.started", "job.failed"], None, False, 600.0, "failed"),
    (["job.queued", "job.cancel_requested", "job.cancelled"], 1.0, True, 9.0, "cancelled"),
])
def test_status_is_derived_from_events_and_signs_of_life(lifecycle, heartbeat_age, alive,
                                                         created_age, expected):
    assert derive_status(lifecycle, heartbeat_age=heartbeat_age, process_alive=alive,
                         created_age=created_age) == expected


@pytest.mark.parametrize(("start", "running"), [
    (None, True),  # no start recorded: the pid alone decides
    ("1.000", False),  # a process that started in 1970 is not this one
])
def test_a_recorded_start_tells_a_process_apart_from_its_pid_successor(start, running):
    assert process_running(os.getpid(), start) is running


def test_this_process_runs_as_recorded_and_ended_ones_do_not():
    assert process_running(os.getpid(), process_start(os.getpid()))
    assert float(process_start(os.getpid())) < time.time()
    for pid in (None, 0, -1, _exited_pid()):
        assert not pid_alive(pid) and not process_running(pid, None)
        assert process_start(pid) is None


def test_a_child_started_elsewhere_imports_the_kiwb_that_started_it(tmp_path):
    # `python -S`: no site-packages, so no installed kiwb either; the child is in another
    # folder, as a worker is in its project. Only the PYTHONPATH given finds kiwb, and it
    # finds this one, ahead of any other on the path.
    import kiwb

    ask = [sys.executable, "-S", "-c", "import kiwb; print(kiwb.__file__)"]
    alone = subprocess.run(ask, cwd=tmp_path, env={}, capture_output=True, text=True)
    assert "No module named 'kiwb'" in alone.stderr
    env = with_this_kiwb({"PYTHONPATH": f"{tmp_path}{os.pathsep}/elsewhere"})
    found = subprocess.run(ask, cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == str(Path(kiwb.__file__).resolve())
    assert env["PYTHONPATH"].split(os.pathsep)[1:] == [str(tmp_path), "/elsewhere"]
    assert with_this_kiwb(env) == env  # not added twice


def test_an_installed_kiwb_leaves_the_childs_path_alone(tmp_path, monkeypatch):
    import site

    import kiwb

    # kiwb in a site-packages folder: the child finds it there, and that folder is not put
    # ahead of the standard library.
    monkeypatch.setattr(site, "getsitepackages",
                        lambda: [str(Path(kiwb.__file__).resolve().parent.parent)])
    assert with_this_kiwb({"PYTHONPATH": "/elsewhere"}) == {"PYTHONPATH": "/elsewhere"}


def test_an_unreaped_child_counts_as_ended():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:  # a zombie until waited for
        wait_until(lambda: not pid_alive(child.pid), timeout=30, what="the child to end",
                   every=0.02)
        assert os.path.exists(f"/proc/{child.pid}") or sys.platform != "linux"  # not reaped yet
    finally:
        child.wait()


def _exited_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "store.sqlite") as opened:
        yield opened


def _running_job(store: Store, run: str, pid: int) -> int:
    job = store.jobs.create("train", run, {})
    store.jobs.claim(job, pid=pid)
    store.jobs.beat(job)
    store.jobs.started(job, {"device": "cpu"})
    return job


def test_a_live_holder_refuses_a_second_job_by_name(store):
    first = _running_job(store, "muki-hard", pid=os.getpid())
    with pytest.raises(JobConflict) as refused:
        store.jobs.create("train", "muki-hard", {})
    assert str(refused.value) == (f"job {first} (train muki-hard, pid {os.getpid()}) is already "
                                  f"running this run; cancel it with: kiwb cancel {first}")
    store.jobs.create("train", "other-run", {})  # another run is not blocked
    store.jobs.create("export", "muki-hard", {})  # nor another kind on the same run
    store.jobs.end(first, "finished", {})
    assert store.jobs.get(store.jobs.create("train", "muki-hard", {})).status == "queued"


def test_a_lock_held_by_a_dead_pid_is_taken_over(store):
    dead = _running_job(store, "muki-hard", pid=_exited_pid())
    assert store.jobs.get(dead).status == "lost"
    taker = store.jobs.create("train", "muki-hard", {})
    store.jobs.claim(taker, pid=os.getpid())
    assert store.connection.execute("SELECT job_id FROM locks").fetchone()[0] == taker


def test_a_stalled_worker_keeps_its_run(store):
    # Its heartbeat is late but its own process still runs (stopped, swapped out, waiting on
    # the store): a second writer would collide with it when it wakes up.
    stalled = _running_job(store, "muki-hard", pid=os.getpid())
    store.connection.execute("UPDATE heartbeats SET ts = ?", (time.time() - HEARTBEAT_STALE_S - 5,))
    assert store.jobs.get(stalled).status == "stalled"
    with pytest.raises(JobConflict, match=f"job {stalled} "):
        store.jobs.create("train", "muki-hard", {})


def test_a_pid_given_to_another_process_frees_the_run(store):
    # The recorded worker is gone and the system gave its pid to a live process (here, this
    # one): the start time recorded beside the pid tells them apart.
    reused = _running_job(store, "muki-hard", pid=os.getpid())
    store.connection.execute("UPDATE jobs SET pid_start = '1.000' WHERE id = ?", (reused,))
    assert store.jobs.get(reused).status == "lost"
    taker = store.jobs.create("train", "muki-hard", {})
    assert store.jobs.get(taker).status == "queued"


def test_a_shard_claim_of_a_reused_pid_is_free(store):
    store.register_score_set("k", teacher="a", dataset="unlabeled", num_texts=4, num_shards=2, meta={})
    assert store.claim_shard("k", 0, owner="first")
    assert not store.claim_shard("k", 0, owner="second")  # the first claimant runs: refused
    store.connection.execute("UPDATE score_shards SET pid_start = '1.000'")  # ...its pid reused
    assert store.claim_shard("k", 0, owner="second")


def test_a_second_process_cannot_claim_a_running_job(store):
    job = _running_job(store, "muki-hard", pid=os.getpid())
    with pytest.raises(JobConflict, match=f"job {job} .* is already running"):
        store.jobs.claim(job, pid=_exited_pid())  # any other pid than the running worker's


def test_an_ending_is_recorded_once(store):
    job = _running_job(store, "r", pid=os.getpid())
    assert store.jobs.end(job, "cancelled", {"killed": True})
    assert not store.jobs.end(job, "finished", {})
    assert store.jobs.get(job).status == "cancelled"
    assert store.connection.execute("SELECT COUNT(*) FROM locks").fetchone()[0] == 0


WRITER = textwrap.dedent("""
    import sys
    from kiwb.project.store import Store
    with Store(sys.argv[1]) as store:
        job = store.jobs.create("score", "scores", {})
        for step in range(int(sys.argv[2])):
            store.append_event("test.step", {"step": step}, job_id=job)
            if step % 10 == 0:
                store.jobs.beat(job)
        store.jobs.end(job, "finished", {})
""")


def test_a_reader_sees_a_writing_process_events_in_order(store):
    count = 400
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store.path), str(count)])
    seen, lags, last_id, deadline = [], [], 0, Deadline(60, "the writer's 400 events")
    while not deadline.expired:
        finished = writer.poll() is not None  # read once more after the writer ended
        now = time.time()
        for event in store.events_after(last_id):
            seen.append(event)
            lags.append(now - event["ts"])
            last_id = event["id"]
        if finished:
            break
        time.sleep(0.01)
    assert writer.returncode == 0
    ids = [event["id"] for event in seen]
    assert all(a < b for a, b in zip(ids, ids[1:], strict=False))
    assert ids == [event["id"] for event in store.events_after(0)]  # none missing
    steps = [event["data"]["step"] for event in seen if event["kind"] == "test.step"]
    assert steps == list(range(count))
    assert [seen[0]["kind"], seen[-1]["kind"]] == ["job.queued", "job.finished"]
    assert max(lags) < 1.0, f"a write took {max(lags):.2f} s to be seen"


def test_the_job_api_and_launcher_import_no_heavy_library():
    """The TUI starts and watches jobs through these modules, so they must stay light."""
    probe = ("import sys, kiwb.launch, kiwb.project.jobs, kiwb.workers.job\n"
             "print(sorted({'torch', 'transformers', 'datasets', 'textual'} & set(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_a_lost_job_whose_last_heartbeat_came_before_its_start_lasted_no_time():
    """A worker beats as it begins and records its start after: lost in between, it shows
    0s, never minus an hour and 59 minutes."""
    from kiwb.project.jobs import JobState, format_duration

    job = JobState(id=1, kind="score", run="score", settings={}, pid=None, host=None, device=None,
                   log_path=None, created_at=100.0, started_at=102.0, ended_at=None,
                   heartbeat_at=100.5, status="lost")
    assert job.duration() == 0.0 and format_duration(job.duration()) == "0m 00s"
    assert format_duration(-7199.0) == "0m 00s"
    assert format_duration(3725.0) == "1h 02m" and format_duration(187.0) == "3m 07s"
