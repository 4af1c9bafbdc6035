"""Read-only queries over a project's store and folder, for the workbench.

Every function takes an open `Store` (or the project root) and reads; none writes, none
imports torch or textual. The workbench calls them from worker threads, each with its own
connection, so they are plain functions rather than methods of a shared object.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError
from kiwb.project.dropout_rates import score_set_dropout
from kiwb.project.instances import Instance, InstanceFilter, count, labeled_in, page
from kiwb.project.jobs import JobState
from kiwb.project.labels import label_count, labels_by_hash, labels_fingerprint
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import IntegrationRecord
from kiwb.project.run_folder import list_checkpoints, read_best
from kiwb.project.shard_files import problem_with, read_bytes
from kiwb.project.store import Store
from kiwb.shell import command

# Event kinds the workbench follows; job.* lifecycle is read through store.jobs instead.
FEED_KINDS = ("score.shard", "train.start", "train.step", "train.eval", "train.check",
              "train.done", "train.stopped")
EVENT_BATCH = 5000
MAX_EVENTS = 100_000  # per poll: a long history is caught up with over a few polls


@contextmanager
def open_store(root: Path) -> Iterator[Store | None]:
    """The project's store, or None while no command has created it yet."""
    path = ProjectPaths(Path(root)).store
    if not path.is_file():
        yield None
        return
    store = Store(path)
    try:
        yield store
    finally:
        store.close()


@dataclass(frozen=True)
class ScoreSetProgress:
    """How far one score set (one teacher on one data set) is."""

    key: str
    teacher: str
    dataset: str
    num_texts: int
    num_shards: int
    done_shards: int
    done_rows: int
    created_at: float
    # what scoring recorded of its teacher's MC dropout (dropout_rates.score_set_dropout)
    dropout: dict | None = None

    @property
    def complete(self) -> bool:
        return self.done_shards >= self.num_shards


@dataclass(frozen=True)
class StoreChanges:
    """What one poll of the store found: new events, and the current jobs and score sets."""

    last_event_id: int
    events: list[dict[str, Any]]
    more_events: bool
    jobs: list[JobState]
    score_sets: list[ScoreSetProgress]
    integration: IntegrationRecord | None  # the newest one, only when it changed
    integration_stamp: float | None
    given_labels: int = 0  # labels given in the Conflicts pane (the forms' "given labels")


def read_changes(store: Store, after_id: int, integration_stamp: float | None,
                 max_events: int = MAX_EVENTS) -> StoreChanges:
    """Events of FEED_KINDS after `after_id` (up to `max_events`), the jobs, the score sets,
    and the newest integration when it is not the one stamped `integration_stamp`."""
    events: list[dict[str, Any]] = []
    while len(events) < max_events:
        batch = feed_events(store, events[-1]["id"] if events else after_id,
                            min(EVENT_BATCH, max_events - len(events)))
        events += batch
        if len(batch) < EVENT_BATCH:
            break
    latest = latest_integration(store)
    stamp = latest.created_at if latest is not None else None
    return StoreChanges(
        last_event_id=events[-1]["id"] if events else after_id,
        events=events, more_events=len(events) >= max_events, jobs=store.jobs.all(),
        score_sets=score_progress(store),
        integration=latest if stamp != integration_stamp else None, integration_stamp=stamp,
        given_labels=label_count(store.connection),
    )


def feed_events(store: Store, after_id: int, limit: int = EVENT_BATCH) -> list[dict[str, Any]]:
    marks = ",".join("?" * len(FEED_KINDS))
    rows = store.connection.execute(
        f"SELECT id, job_id, run, ts, kind, data_json FROM events WHERE id > ? AND kind IN ({marks}) "
        "ORDER BY id LIMIT ?", (after_id, *FEED_KINDS, limit))
    return [{"id": r["id"], "job_id": r["job_id"], "run": r["run"], "ts": r["ts"], "kind": r["kind"],
             "data": json.loads(r["data_json"])} for r in rows]


def score_progress(store: Store) -> list[ScoreSetProgress]:
    """Every score set with its finished shards and rows, oldest first."""
    rows = store.connection.execute(
        "SELECT s.key, s.teacher, s.dataset, s.num_texts, s.num_shards, s.created_at, "
        "s.meta_json, COUNT(d.shard) AS done, COALESCE(SUM(d.rows), 0) AS done_rows "
        "FROM score_sets s LEFT JOIN score_shards d ON d.score_key = s.key AND "
        "d.status = 'done' GROUP BY s.key ORDER BY s.created_at, s.key")
    return [ScoreSetProgress(r["key"], r["teacher"], r["dataset"], r["num_texts"], r["num_shards"],
                             r["done"], r["done_rows"], r["created_at"],
                             score_set_dropout(json.loads(r["meta_json"]))) for r in rows]


def latest_integration(store: Store) -> IntegrationRecord | None:
    """The most recently recorded integration."""
    row = store.connection.execute(
        "SELECT key FROM integrations ORDER BY created_at DESC LIMIT 1").fetchone()
    return IntegrationRecord.from_dict(store.integration(row["key"])) if row else None


# -- conflicting texts ---------------------------------------------------------------------

def conflict_page(store: Store, integration: str, filters: InstanceFilter,
                  after: tuple | None = None, limit: int = 100) -> list[Instance]:
    """Up to `limit` texts of an integration in the filter's order, after the key `after`."""
    return page(store.connection, integration, filters, after=after, limit=limit)


def conflict_count(store: Store, integration: str, filters: InstanceFilter) -> int:
    return count(store.connection, integration, filters)


@dataclass(frozen=True)
class LabelProgress:
    """What the labels given to an integration's texts are doing: the Conflicts pane's header."""

    in_store: int     # every label given in the project
    labeled: int      # texts of this integration with a decision (none included)
    none: int         # of them, marked none of these labels
    agree: int        # labeled texts whose winning teacher knows their label
    judged: int       # labeled texts (not none) the agreement is counted over
    before: float | None = None  # the agreement under the latest integration without labels
    # the integration read the labels as they are now (the same fingerprint): they are in use
    read_current: bool = False
    # its routing was fitted on the labels it read: agreeing with them measures nothing
    fitted_on: bool = False

    @property
    def agreement(self) -> float | None:
        return self.agree / self.judged if self.judged else None


def label_progress(store: Store, integration: IntegrationRecord) -> LabelProgress:
    """How many texts of `integration` are labeled and how often its routing agrees with them
    (a teacher agrees when the label is one of its own); for an integration that used the
    labels, the same agreement under the one before it that did not."""
    decided = labeled_in(store.connection, integration.key)
    agree, judged = _agreement(store, integration, decided)
    before = None
    if integration.settings.labels and judged:
        earlier = _integration_without_labels(store, integration.created_at)
        if earlier is not None:
            hashes = {row[0] for row in decided}  # the same texts, as routed back then
            then = [row for row in labeled_in(store.connection, earlier.key) if row[0] in hashes]
            agree_then, judged_then = _agreement(store, earlier, then)
            before = agree_then / judged_then if judged_then else None
    given = integration.summary.gold_labels
    read_current = given is not None and given.fingerprint == labels_fingerprint(
        labels_by_hash(store.connection))
    return LabelProgress(label_count(store.connection), len(decided),
                         sum(1 for row in decided if row[2] is None), agree, judged, before,
                         read_current=read_current,
                         fitted_on=given is not None and given.routing_labels > 0)


def _agreement(store: Store, integration: IntegrationRecord,
               decided: list[tuple]) -> tuple[int, int]:
    per_teacher = integration.summary.per_teacher
    judged = [(routed, label) for _hash, routed, label in decided if label is not None]
    agree = sum(1 for routed, label in judged
                if routed < len(per_teacher) and label in (per_teacher[routed].labels or ()))
    return agree, len(judged)


def _integration_without_labels(store: Store, before: float) -> IntegrationRecord | None:
    rows = store.connection.execute(
        "SELECT key, settings_json FROM integrations WHERE created_at < ? "
        "ORDER BY created_at DESC", (before,))
    for row in rows:
        if not json.loads(row["settings_json"]).get("labels"):
            return IntegrationRecord.from_dict(store.integration(row["key"]))
    return None


@dataclass(frozen=True)
class TeacherView:
    """One teacher's scores of one text: distributions over its own labels and confidences."""

    teacher: str
    labels: list[str]
    mc_probs: list[float]
    det_probs: list[float]
    mc_confidence: float
    det_confidence: float
    mutual_information: float | None


def teacher_views(root: Path, store: Store, integration: IntegrationRecord,
                  row: int) -> list[TeacherView]:
    """Each teacher's stored scores of text `row` of an integration's unlabeled data, read from
    the score sets the integration recorded it read.

    Reads only the one shard file per teacher that holds the row.
    """
    import numpy as np

    paths = ProjectPaths(Path(root))
    views = []
    for facts in integration.summary.per_teacher:
        record = _score_set_of(store, facts.score_key)
        if record is None:
            continue
        meta = json.loads(record["meta_json"])
        shard = row // int(meta["shard_size"])
        file = paths.shard_file(record["key"], shard)
        checked = store.shard_records(record["key"]).get(shard)
        data = read_bytes(file)
        # a shard missing or damaged shows no view (kiwb score names it and scores it again)
        if checked is None or problem_with(data, checked, shard * int(meta["shard_size"])):
            continue
        with np.load(io.BytesIO(data)) as arrays:
            index = row - int(arrays["rows"][0])
            mi = arrays["mutual_information"][index] if "mutual_information" in arrays else None
            views.append(TeacherView(
                teacher=facts.name, labels=list(meta["labels"]),
                mc_probs=[float(p) for p in arrays["mc_probs"][index]],
                det_probs=[float(p) for p in arrays["det_probs"][index]],
                mc_confidence=float(arrays["mc_confidence"][index]),
                det_confidence=float(arrays["det_confidence"][index]),
                mutual_information=None if mi is None else float(mi)))
    return views


def _score_set_of(store: Store, key: str | None) -> sqlite3.Row | None:
    """The score set a teacher's facts say the integration read (None: not recorded)."""
    return None if key is None else store.connection.execute(
        "SELECT key, meta_json FROM score_sets WHERE key = ?", (key,)).fetchone()


# -- runs and checkpoints in the project folder --------------------------------------------

@dataclass(frozen=True)
class RunFolder:
    """A training run's folder: its checkpoints, its best one and its manifest."""

    run: str
    checkpoints: list[str]
    best: dict[str, Any] | None
    method: str | None
    labels: list[str] = field(default_factory=list)


def run_folders(root: Path) -> list[RunFolder]:
    """Runs with at least one finished checkpoint, by name."""
    runs_dir = ProjectPaths(Path(root)).runs
    found = []
    for folder in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else ():
        checkpoints = [checkpoint.name for checkpoint in list_checkpoints(folder)]
        if not checkpoints:
            continue
        manifest = _read_json(folder / "manifest.json") or {}
        method = manifest.get("method")
        found.append(RunFolder(
            run=folder.name, checkpoints=checkpoints, best=read_best(folder),
            method=method.get("method") if isinstance(method, dict) else method,
            labels=list(manifest.get("labels") or [])))
    return found


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def recorded_integration(root: Path, key: str) -> IntegrationRecord:
    """The integration recorded under `key` (an integrate job's ending names it)."""
    with Store(ProjectPaths(Path(root)).store) as store:
        record = store.integration(key)
    if record is None:
        raise KiwbError(f"no integration {key!r} in {root}; run {command('integrate', root)}")
    return IntegrationRecord.from_dict(record)
