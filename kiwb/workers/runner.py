"""Running one recorded job in this process, from its first heartbeat to its recorded ending.

`python -m kiwb.workers PROJECT JOB_ID` is the detached worker that `launch_job` starts;
`kiwb score/integrate/train/export --foreground` run the same `run_job` in their own process.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from pathlib import Path

from kiwb.console import console
from kiwb.errors import KiwbError
from kiwb.project.backups import back_up
from kiwb.project.job_checks import check_before_recording
from kiwb.project.job_specs import JobSpec
from kiwb.project.jobs import LOG_TAIL_LINES, JobConflict, read_log_tail
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers.job import EXIT_CANCELLED, JobSession, Outcome
from kiwb.workers.job_kinds import WORK


def run_in_foreground(store: Store, spec: JobSpec, project_label: str) -> tuple[int, int]:
    """Record a job for `spec` and run it in this process; its id and exit status."""
    project = check_before_recording(spec, ProjectPaths(store.path.parent).config)
    job_id = store.jobs.create(spec.kind, spec.job_run(), spec.settings())
    return job_id, run_job(store, job_id, project_label=project_label, project=project)


def run_job(store: Store, job_id: int, *, project_label: str | None = None,
            project=None) -> int:
    """Run a recorded job here until it ends, record how, and return the exit code
    (`project`: the project as read when the job was checked in this process, else None)."""
    job = store.jobs.get(job_id)
    if job.ending is not None:
        print(f"kiwb: error: job {job_id} already ended ({job.status})", file=sys.stderr)
        return 2
    session = JobSession(store, job, project_label or str(store.path.parent), project=project)
    try:
        session.begin()
    except JobConflict as error:
        if error.holder != job_id:  # refused for another job: this one never runs
            store.jobs.end(job_id, "failed", {"error": str(error)})
        print(f"kiwb: error: {error}", file=sys.stderr)
        return 2
    try:
        outcome = (Outcome("cancelled", {"before_start": True}, EXIT_CANCELLED)
                   if session.should_stop() else WORK[job.kind](session))
    except (Exception, KeyboardInterrupt) as error:  # every ending is recorded, then reported
        outcome = _outcome_of(error, session)
    session.finish(outcome)
    if outcome.status == "cancelled" or outcome.exit_code == 1:
        hint = job.resume_command(session.project_label)
        console.print(f"Resume with: [bold]{hint}[/bold]", highlight=False, soft_wrap=True)
    # a copy of the store as this job left it, to put back should the store be damaged later
    back_up(store.connection, store.path.parent, f"job {job_id} ({job.label})")
    return outcome.exit_code


def _outcome_of(error: BaseException, session: JobSession) -> Outcome:
    if isinstance(error, KeyboardInterrupt):
        print("kiwb: interrupted", file=sys.stderr)
        return Outcome("cancelled", {"at_once": True}, EXIT_CANCELLED)
    if isinstance(error, InterruptedError) and session.should_stop():
        console.print(f"Stopped at a batch boundary: {error}")
        return Outcome("cancelled", {}, EXIT_CANCELLED)
    if isinstance(error, KiwbError):
        print(f"kiwb: error: {error}", file=sys.stderr)
        message, exit_code, lines = str(error), 2, [f"kiwb: error: {error}"]
    else:
        traceback.print_exc()
        message = f"{type(error).__name__}: {error}".splitlines()[0]
        exit_code, lines = 1, traceback.format_exc().splitlines()
    sys.stderr.flush()
    log_path = session.job.log_path or session.store.jobs.get(session.job.id).log_path
    tail = read_log_tail(Path(log_path)) if log_path else lines[-LOG_TAIL_LINES:]
    return Outcome("failed", {"error": message, "log_tail": tail}, exit_code)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m kiwb.workers PROJECT JOB_ID", file=sys.stderr)
        return 2
    root = Path(args[0]).resolve()
    print(f"kiwb job {args[1]} · pid {os.getpid()} on {socket.gethostname()} · "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", file=sys.stderr, flush=True)
    try:
        with Store(ProjectPaths(root).store) as store:
            return run_job(store, int(args[1]), project_label=str(root))
    except KiwbError as error:
        print(f"kiwb: error: {error}", file=sys.stderr)
        return 2
