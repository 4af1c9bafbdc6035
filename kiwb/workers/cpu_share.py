"""Sharing this machine's CPU cores between the kiwb jobs running on it.

Each torch process starts with one intra-op thread per core. Two such jobs on one machine
ask for twice the cores there are, and OpenMP's threads then spin waiting for each other: on
2 cores two scoring jobs each ran about 13 times slower than alone (BENCHMARKS.md). So every
job registers itself in a folder shared by all kiwb jobs of this user on this machine,
whatever project they belong to, and uses its share of the cores: cores // running jobs, at
least one. A job looks again now and then between batches (never inside one), so the first
job gives cores back when a second starts and takes them back when it ends. A user's own
OMP_NUM_THREADS (or a demo that fixed the threads) is left alone.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from kiwb.project.processes import process_running, process_start

FOLDER_ENV = "KIWB_CPU_SHARE_DIR"  # where the running jobs register (tests use their own)
LOOK_EVERY_S = 2.0


def share_folder() -> Path:
    """The folder where this machine's running kiwb jobs register."""
    if os.environ.get(FOLDER_ENV):
        return Path(os.environ[FOLDER_ENV])
    from platformdirs import user_state_dir

    return Path(user_state_dir("kiwb")) / "running-jobs"


def machine_cores() -> int:
    """The cores this process may run on (a container's or taskset's limit, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return os.cpu_count() or 1


class CpuShare:
    """This process's entry among the running jobs, and the thread count that follows."""

    def __init__(self, label: str, folder: Path | None = None, cores: int | None = None,
                 set_threads=None):
        self.label = label
        self.folder = folder or share_folder()
        self.cores = cores or machine_cores()
        # Named by host too: a home folder shared between machines holds other hosts' entries,
        # which are neither counted nor cleared here.
        self.entry = self.folder / f"{socket.gethostname()}-{os.getpid()}.json"
        self.fixed = os.environ.get("OMP_NUM_THREADS")  # the user's choice stands
        self._set_threads = set_threads or _torch_threads
        self.threads: int | None = None
        self.others = 0
        self._looked = 0.0

    def join(self) -> str | None:
        """Register this job and take its share; the line for its log when it shares the
        cores (a job alone, or one whose threads the user set, has nothing to say)."""
        if self.fixed:
            return None
        self._write_entry()
        line = self.rebalance(force=True)
        return line if self.others else None

    def _write_entry(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.entry.write_text(json.dumps({"pid": os.getpid(), "start": process_start(os.getpid()),
                                          "job": self.label}), encoding="utf-8")

    def rebalance(self, force: bool = False) -> str | None:
        """Take this job's share of the cores again if the running jobs changed (looked at
        most every LOOK_EVERY_S); the line saying so, or None when nothing changed. Call it
        between batches, on the thread that runs the torch work."""
        if self.fixed:
            return None
        now = time.monotonic()
        if not force and now - self._looked < LOOK_EVERY_S:
            return None
        self._looked = now
        if not self.entry.exists():  # cleared by a job that took our pid for a dead one's
            self._write_entry()
        others = self._other_jobs()
        threads = max(1, self.cores // (others + 1))
        if threads == self.threads and not force:
            return None
        self.threads, self.others = threads, others
        self._set_threads(threads)
        if not others:
            return f"CPU threads: {threads} of {self.cores} cores (no other kiwb job runs here)"
        return (f"CPU threads: {threads} of {self.cores} cores, shared with {others} other kiwb "
                f"process{'es' if others > 1 else ''} on this machine (jobs, or ranks of one)")

    def leave(self) -> None:
        self.entry.unlink(missing_ok=True)

    def _other_jobs(self) -> int:
        count = 0
        for path in self.folder.glob(f"{socket.gethostname()}-*.json"):
            if path == self.entry:
                continue
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):  # being written, or just removed
                continue
            if process_running(entry.get("pid"), entry.get("start")):
                count += 1
            else:  # a job killed before it could leave
                path.unlink(missing_ok=True)
        return count


def _torch_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
