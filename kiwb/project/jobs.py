"""Jobs in the store: records, lifecycle events, heartbeats, run locks, and derived status.

A job's status is never stored. It follows from its `job.*` events and, while none of them
says the job ended, from signs of life: a fresh heartbeat and, on this host, a running pid.
So a worker that dies without a word shows as lost, never as running forever.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError
from kiwb.project.database import Database
from kiwb.project.events import events_after, insert_event
from kiwb.project.job_specs import JOB_KINDS, JobSpec, job_label, spec_of
from kiwb.project.processes import process_running, process_start

HEARTBEAT_EVERY_S = 2.0
# Longer than a few missed beats of a busy machine, short enough that a dead job on another
# host (whose pid cannot be checked) is seen as lost quickly.
HEARTBEAT_STALE_S = 10.0
# job.lost: recorded by a distributed job's rank 0 when another rank died (a job whose own
# worker dies shows as lost without a record, from its heartbeat).
ENDINGS = {"job.finished": "finished", "job.failed": "failed", "job.cancelled": "cancelled",
           "job.lost": "lost"}
LIVE_STATUSES = frozenset({"queued", "running", "cancelling", "stalled"})
LOG_TAIL_LINES = 20
_LIFECYCLE = ("job.queued", "job.started", "job.cancel_requested", *ENDINGS)


class JobConflict(KiwbError):
    """Another live job already writes this run (or another process already runs this job)."""

    def __init__(self, message: str, holder: int):
        super().__init__(message)
        self.holder = holder


def derive_status(lifecycle: Sequence[str], *, heartbeat_age: float | None,
                  process_alive: bool | None, created_age: float) -> str:
    """A job's status from its lifecycle event kinds (oldest first) and its signs of life.

    `process_alive` is None where the process cannot be checked (another host, or none
    yet). A job that never beat counts its age from its creation. A job whose heartbeat is
    late while its own process still runs is "stalled" (stopped, swapped out, or waiting on
    the store): it keeps its run, since a second writer would collide with it.
    """
    for kind in reversed(lifecycle):
        if kind in ENDINGS:
            return ENDINGS[kind]
    last_sign_of_life = created_age if heartbeat_age is None else heartbeat_age
    if process_alive is False:
        return "lost"
    if last_sign_of_life > HEARTBEAT_STALE_S:
        return "stalled" if process_alive else "lost"
    if "job.started" not in lifecycle:
        return "queued"
    return "cancelling" if "job.cancel_requested" in lifecycle else "running"


# Settings that say how a job runs, not what it makes: a later job that differs only in these
# did the same work (a resume, another device).
_HOW_IT_RUNS = frozenset({"device", "devices", "batch_size", "resume", "force"})


def taken_over_by(job: JobState, jobs: Sequence[JobState]) -> JobState | None:
    """The first later job that does the same work (same kind, run and settings, bar how it
    runs) and is live or finished, if any.

    Once one exists, a failed or lost job's "resume with" hint is stale: following it
    again would redo (or collide with) the work the later job did. Every integration shares
    one run name, so the settings tell another integration from a re-run of this one.
    """
    later = [other for other in jobs
             if other.id > job.id and other.kind == job.kind and other.run == job.run
             and same_work(job.settings, other.settings)
             and (other.live or other.status == "finished")]
    return min(later, key=lambda other: other.id, default=None)


def same_work(settings: dict, other: dict) -> bool:
    """Whether two jobs' settings ask for the same result."""
    keys = (set(settings) | set(other)) - _HOW_IT_RUNS
    return all(settings.get(key) == other.get(key) for key in keys)


@dataclass
class JobState:
    """A job as any reader sees it: its record plus what its events and heartbeat say."""

    id: int
    kind: str
    run: str
    settings: dict[str, Any]
    pid: int | None
    host: str | None
    device: str | None
    log_path: str | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    heartbeat_at: float | None
    status: str
    progress: dict[str, Any] | None = None
    ending: dict[str, Any] | None = None  # data of its job.finished / failed / cancelled event
    log_tail: list[str] | None = None  # for failed and lost jobs

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES

    @property
    def label(self) -> str:
        """`score`, or `train RUN` / `export RUN`."""
        return job_label(self.kind, self.run)

    @property
    def spec(self) -> JobSpec:
        """What the job was asked to do, typed."""
        return spec_of(self.kind, self.settings, self.run)

    def resume_command(self, project: str) -> str:
        """The command that continues (or repeats) this job from where it stopped."""
        return self.spec.resume_command(project)

    @property
    def error(self) -> str | None:
        return (self.ending or {}).get("error")

    def duration(self, now: float | None = None) -> float | None:
        """Seconds from start to end (to the last heartbeat for a lost job)."""
        if self.started_at is None:
            return None
        end = self.ended_at or (self.heartbeat_at if self.status == "lost" else None)
        # a lost worker's last heartbeat can come before it recorded its start (it beats as
        # it begins, then starts): it ran for no measurable time, not for minus seconds
        return max(0.0, (end or now or time.time()) - self.started_at)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label, "live": self.live, "error": self.error,
                "duration_s": self.duration()}


class Jobs:
    """The job API of a store (`store.jobs`)."""

    def __init__(self, store: Database):
        self._store = store
        self._db = store.connection

    # -- writing -----------------------------------------------------------------------
    def create(self, kind: str, run: str, settings: dict[str, Any]) -> int:
        """Record a queued job holding its run's lock; JobConflict names a live holder."""
        if kind not in JOB_KINDS:
            raise KiwbError(f"unknown job kind {kind!r}; use one of {', '.join(JOB_KINDS)}")
        with self._store.transaction() as db:
            self._refuse_if_locked(db, kind, run, job_id=None)
            job_id = int(db.execute(
                "INSERT INTO jobs (kind, run, settings_json, created_at) VALUES (?, ?, ?, ?)",
                (kind, run, json.dumps(settings), time.time())).lastrowid)
            self._lock(db, kind, run, job_id)
            insert_event(db, "job.queued", {"settings": settings}, job_id=job_id, run=run)
        return job_id

    def attach(self, job_id: int, *, pid: int, host: str | None = None,
               log_path: str | None = None) -> None:
        """Record the process that runs a job and where its output goes."""
        with self._store.transaction() as db:
            db.execute("UPDATE jobs SET pid=?, pid_start=?, host=?, log_path=COALESCE(?, log_path) "
                       "WHERE id=?", (pid, process_start(pid), host or socket.gethostname(), log_path,
                                      job_id))

    def claim(self, job_id: int, *, pid: int, host: str | None = None) -> None:
        """Make `pid` the job's worker and take its run's lock (JobConflict if taken)."""
        with self._store.transaction() as db:
            job = self.get(job_id)
            if job.live and job.pid not in (None, pid):
                raise JobConflict(conflict_message(job), holder=job.id)
            self._refuse_if_locked(db, job.kind, job.run, job_id=job_id)
            self._lock(db, job.kind, job.run, job_id)
            db.execute("UPDATE jobs SET pid=?, pid_start=?, host=? WHERE id=?",
                       (pid, process_start(pid), host or socket.gethostname(), job_id))

    def started(self, job_id: int, info: dict[str, Any]) -> None:
        """The job's work begins; `info` names its device (and GPU) and process."""
        with self._store.transaction() as db:
            db.execute("UPDATE jobs SET started_at=?, device=? WHERE id=?",
                       (time.time(), info.get("device"), job_id))
            insert_event(db, "job.started", info, job_id=job_id, run=self._run_of(db, job_id))

    def beat(self, job_id: int) -> None:
        with self._store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO heartbeats VALUES (?, ?)", (job_id, time.time()))

    def record_progress(self, job_id: int, progress: dict[str, Any]) -> None:
        with self._store.transaction() as db:
            insert_event(db, "job.progress", progress, job_id=job_id, run=self._run_of(db, job_id))

    def request_cancel(self, job_id: int, by: str) -> None:
        with self._store.transaction() as db:
            insert_event(db, "job.cancel_requested", {"by": by}, job_id=job_id,
                         run=self._run_of(db, job_id))

    def cancel_requested(self, job_id: int) -> bool:
        return self._db.execute(
            "SELECT 1 FROM events WHERE job_id=? AND kind='job.cancel_requested' LIMIT 1",
            (job_id,)).fetchone() is not None

    def end(self, job_id: int, status: str, data: dict[str, Any]) -> bool:
        """Record how a job ended and free its run; False if its ending was already recorded."""
        kind = {ended: event for event, ended in ENDINGS.items()}[status]
        with self._store.transaction() as db:
            if self._ending_of(db, job_id) is not None:
                return False
            db.execute("UPDATE jobs SET ended_at=? WHERE id=?", (time.time(), job_id))
            insert_event(db, kind, data, job_id=job_id, run=self._run_of(db, job_id))
            db.execute("DELETE FROM locks WHERE job_id=?", (job_id,))
        return True

    # -- reading -----------------------------------------------------------------------
    def get(self, job_id: int) -> JobState:
        row = self._db.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row is None:
            raise KiwbError(f"no job {job_id} in {self._store.path.parent}; list them with: kiwb jobs")
        return self._state(row)

    def progress_after(self, job_id: int, after_id: int) -> list[dict[str, Any]]:
        """A job's job.progress events with id > after_id, oldest first."""
        return events_after(self._db, after_id, job_id=job_id, kind="job.progress")

    def all(self) -> list[JobState]:
        """Every job of the project, oldest first."""
        return [self._state(row) for row in self._db.execute("SELECT * FROM jobs ORDER BY id")]

    def _state(self, row: sqlite3.Row) -> JobState:
        now = time.time()
        here = row["pid"] is not None and row["host"] == socket.gethostname()
        alive = process_running(row["pid"], row["pid_start"]) if here else None
        # Read the events after checking the pid: a worker records its ending before it
        # exits, so a dead pid with no ending in the events read afterwards really is lost.
        lifecycle = self._db.execute(
            f"SELECT kind, data_json FROM events WHERE job_id=? AND kind IN "
            f"({','.join('?' * len(_LIFECYCLE))}) ORDER BY id", (row["id"], *_LIFECYCLE)).fetchall()
        beat = self._db.execute("SELECT ts FROM heartbeats WHERE job_id=?", (row["id"],)).fetchone()
        heartbeat_at = beat["ts"] if beat else None
        status = derive_status(
            [event["kind"] for event in lifecycle], process_alive=alive,
            heartbeat_age=None if heartbeat_at is None else now - heartbeat_at,
            created_age=now - row["created_at"])
        ending = next((json.loads(e["data_json"]) for e in lifecycle if e["kind"] in ENDINGS), None)
        progress = self._db.execute(
            "SELECT data_json FROM events WHERE job_id=? AND kind='job.progress' "
            "ORDER BY id DESC LIMIT 1", (row["id"],)).fetchone()
        log_tail = None
        if status == "failed" or (ending or {}).get("log_tail"):
            log_tail = (ending or {}).get("log_tail")
        elif status == "lost" and row["log_path"]:
            log_tail = read_log_tail(Path(row["log_path"]))
        return JobState(
            id=row["id"], kind=row["kind"], run=row["run"], settings=json.loads(row["settings_json"]),
            pid=row["pid"], host=row["host"], device=row["device"], log_path=row["log_path"],
            created_at=row["created_at"], started_at=row["started_at"], ended_at=row["ended_at"],
            heartbeat_at=heartbeat_at, status=status, ending=ending, log_tail=log_tail,
            progress=json.loads(progress["data_json"]) if progress else None,
        )

    # -- locks -------------------------------------------------------------------------
    def _refuse_if_locked(self, db: sqlite3.Connection, kind: str, run: str,
                          job_id: int | None) -> None:
        row = db.execute("SELECT job_id FROM locks WHERE kind=? AND run=?", (kind, run)).fetchone()
        if row is None or row["job_id"] == job_id:
            return
        holder = self.get(row["job_id"])
        if holder.live:  # a lock whose holder is dead or ended blocks no one
            raise JobConflict(conflict_message(holder), holder=holder.id)

    @staticmethod
    def _lock(db: sqlite3.Connection, kind: str, run: str, job_id: int) -> None:
        db.execute("INSERT OR REPLACE INTO locks VALUES (?, ?, ?, ?)", (kind, run, job_id, time.time()))

    @staticmethod
    def _run_of(db: sqlite3.Connection, job_id: int) -> str | None:
        row = db.execute("SELECT run FROM jobs WHERE id=?", (job_id,)).fetchone()
        return row["run"] if row else None

    @staticmethod
    def _ending_of(db: sqlite3.Connection, job_id: int) -> str | None:
        row = db.execute(
            f"SELECT kind FROM events WHERE job_id=? AND kind IN ({','.join('?' * len(ENDINGS))}) "
            "LIMIT 1", (job_id, *ENDINGS)).fetchone()
        return row["kind"] if row else None


def conflict_message(holder: JobState) -> str:
    process = f"pid {holder.pid}" if holder.pid else "starting"
    if holder.host and holder.host != socket.gethostname():
        process += f" on {holder.host}"
    return (f"job {holder.id} ({holder.label}, {process}) is already running this run; "
            f"cancel it with: kiwb cancel {holder.id}")


def read_log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines of a log file (empty if it is missing)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.replace("\r", "\n").splitlines() if line.strip()][-lines:]


# The plain progress line a worker writes to its log now and then (a log is no terminal for
# a progress bar). Written and recognised here, so a follower can show a bar instead.
_PROGRESS_LINE = re.compile(r"^.*: [\d,]+/[\d,]+ \S+ \([\d.,]+/s, ETA [^)]*\)$")


def progress_line(progress: dict[str, Any]) -> str:
    """`label: done/total unit (rate/s, ETA 12s)` from a job.progress record."""
    eta = "?" if progress.get("eta_s") is None else f"{progress['eta_s']:.0f}s"
    return (f"{progress['label']}: {progress['done']:,}/{progress['total']:,} {progress['unit']} "
            f"({progress['rate']:.1f}/s, ETA {eta})")


def rank_lines(job: JobState) -> list[str]:
    """A distributed job's ranks, one line each: `rank 1 cuda:1 on gpu-2 · pid 4242 · 2,048
    texts` (none for a one-process job)."""
    ranks = (job.progress or {}).get("ranks") or []
    return [f"rank {rank['rank']} {rank['device']} on {rank['host']} · pid {rank['pid']} · "
            f"{rank['texts']:,} texts" for rank in ranks]


def is_progress_line(line: str) -> bool:
    return _PROGRESS_LINE.match(line.rstrip()) is not None


def exit_code(job: JobState) -> int:
    """The exit status of an ended job's worker: 0 finished, 130 cancelled, 2 refused input,
    1 failed or lost."""
    recorded = (job.ending or {}).get("exit_code")
    if recorded is not None:
        return int(recorded)
    return {"finished": 0, "cancelled": 130}.get(job.status, 1)


def format_duration(seconds: float | None) -> str:
    """A job's duration as "1h 05m" or "3m 07s" (empty when unknown)."""
    if seconds is None:
        return ""
    minutes, secs = divmod(max(0, int(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"
