"""Starting, cancelling and following background jobs.

The TUI calls these as the CLI does, so this module imports neither torch nor transformers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError
from kiwb.project.job_checks import check_before_recording
from kiwb.project.job_specs import JobSpec
from kiwb.project.jobs import Jobs
from kiwb.project.paths import ProjectPaths
from kiwb.project.processes import pid_alive, with_this_kiwb
from kiwb.project.store import Store
from kiwb.shell import command

KILL_WAIT_S = 5.0
# Unbuffered, so `kiwb logs -f` shows lines as they come; wide, so a log file (not a
# terminal) does not break commands it prints across lines.
WORKER_ENV = {"PYTHONUNBUFFERED": "1", "COLUMNS": "160"}
FOLLOW_POLL_S = 0.25


def launch_job(project_root: str | Path, spec: JobSpec) -> int:
    """Record a job and start its worker detached from this terminal; returns the job id.

    The worker gets its own session, so a hangup of this terminal, a closed UI or a lost SSH
    connection does not reach it; its output goes to logs/job-ID.log in the project.
    """
    root = Path(project_root).resolve()
    paths = ProjectPaths(root)
    if not paths.config.is_file():
        raise KiwbError(f"{root}: no kiwb.toml here; create a project with: {command('init', root)}")
    check_before_recording(spec, paths.config)
    kind = spec.kind
    paths.make_layout()
    with Store(paths.store) as store:
        job_id = store.jobs.create(kind, spec.job_run(), spec.settings())
        log_path = paths.logs / f"job-{job_id}.log"
        try:
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "kiwb.workers", str(root), str(job_id)],
                    cwd=root, env=with_this_kiwb({**os.environ, **WORKER_ENV}),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True,
                )
        except OSError as error:
            store.jobs.end(job_id, "failed", {"error": f"cannot start the worker: {error}"})
            raise KiwbError(f"cannot start the {kind} worker: {error}") from None
        store.jobs.attach(job_id, pid=process.pid, log_path=str(log_path))
    # A long-lived launcher (the TUI) must reap its finished workers, or they linger as
    # zombies; a launcher that exits first hands them to init, which reaps them.
    threading.Thread(target=process.wait, name=f"kiwb-reap-job-{job_id}", daemon=True).start()
    return job_id


def cancel_job(store: Store, job_id: int) -> str:
    """Ask a job to stop after its current batch; asked a second time, kill it. Says what it did."""
    job = store.jobs.get(job_id)
    if not job.live:
        return f"job {job_id} ({job.label}) already ended: {job.status}"
    here = job.host == socket.gethostname() and pid_alive(job.pid)
    if not store.jobs.cancel_requested(job_id):
        store.jobs.request_cancel(job_id, by=f"kiwb cancel on {socket.gethostname()}")
        # Before its first heartbeat a worker may not handle SIGTERM yet; it reads the
        # request from the store when it starts instead.
        if here and job.heartbeat_at is not None:
            os.kill(job.pid, signal.SIGTERM)
        return (f"asked job {job_id} ({job.label}) to stop after its current batch; "
                f"to end it at once, run: kiwb cancel {job_id} again")
    if job.host not in (None, socket.gethostname()):
        return (f"job {job_id} runs on {job.host}; it stops when it next reads the store. "
                f"Kill it there with: kiwb cancel {job_id}")
    if here:
        os.kill(job.pid, signal.SIGKILL)
        _wait_for_exit(job.pid, KILL_WAIT_S)
    store.jobs.end(job_id, "cancelled", {"killed": True})
    hint = job.resume_command(str(store.path.parent))
    return f"killed job {job_id} ({job.label}); resume it with: {hint}"


def _wait_for_exit(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def follow_log(jobs: Jobs, job_id: int, *, follow: bool = True,
               on_progress: Callable[[dict[str, Any]], None] | None = None) -> Iterator[str]:
    """The text of a job's log as it grows; ends once the job has ended and all is read.

    `on_progress` gets each new job.progress record while following.
    """
    job = jobs.get(job_id)
    if not job.log_path:
        raise KiwbError(f"job {job_id} ran in the foreground; its output went to the terminal "
                        "that started it")
    try:
        handle = open(job.log_path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as error:
        raise KiwbError(f"job {job_id}: cannot read its log {job.log_path}: {error}") from None
    last_progress = 0
    with handle:
        while True:
            if on_progress is not None:
                for event in jobs.progress_after(job_id, last_progress):
                    last_progress = event["id"]
                    on_progress(event["data"])
            chunk = handle.read()
            if chunk:
                yield chunk
                continue
            if not follow or not jobs.get(job_id).live:
                # A last read: the worker may have written its final lines after ours.
                rest = handle.read()
                if rest:
                    yield rest
                return
            time.sleep(FOLLOW_POLL_S)
