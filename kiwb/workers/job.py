"""The running side of a recorded job: heartbeat, cancellation, progress and its ending.

Torch and transformers are imported only once the heartbeat beats, so a slow start still
shows as alive.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kiwb.console import console, progress_bar
from kiwb.project.jobs import (
    HEARTBEAT_EVERY_S,
    JobState,
    progress_line,
)
from kiwb.project.store import Store

PROGRESS_EVENT_EVERY_S = 1.0
LOG_LINE_EVERY_S = 10.0
EXIT_CANCELLED = 130


@dataclass
class Outcome:
    """How a job's work ended: the status to record, its data, and the exit code."""

    status: str = "finished"
    data: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0


class JobSession:
    """The running side of a job: heartbeat thread, cancellation, lifecycle events."""

    def __init__(self, store: Store, job: JobState, project_label: str, project=None):
        self.store, self.job, self.project_label = store, job, project_label
        self.root = store.path.parent
        self.device = None
        self._stop = threading.Event()  # cancel requested: stop at the next batch boundary
        self._done = threading.Event()  # the heartbeat thread should exit
        self._heart: threading.Thread | None = None
        self._previous_sigterm: Any = None
        self._ending = False  # once the work is over, a signal must not cut the recording short
        self._sigterms = 0  # the second SIGTERM (not the heartbeat's view of the store) stops at once
        self._cpu = None  # this job's share of the machine's cores, once it starts working
        # the project as the job reads it: as read when it was checked in this process, else
        # loaded on first use
        self._project = project

    def begin(self) -> None:
        """Take the run's lock, then show signs of life and listen for cancellation."""
        jobs = self.store.jobs
        jobs.claim(self.job.id, pid=os.getpid())
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        jobs.beat(self.job.id)  # after the handler: `kiwb cancel` signals only jobs that beat
        if jobs.cancel_requested(self.job.id):
            self._stop.set()
        self._heart = threading.Thread(target=self._beat_until_done, daemon=True,
                                       name=f"kiwb-heartbeat-{self.job.id}")
        self._heart.start()

    def should_stop(self) -> bool:
        """Whether to stop at this batch boundary; also where the job takes its share of the
        cores again when other kiwb jobs started or ended (the work's thread calls it between
        batches, where changing torch's thread count is safe)."""
        if self._cpu is not None:
            line = self._cpu.rebalance()
            if line:
                console.print(line, highlight=False, markup=False)
        return self._stop.is_set()

    def project(self):
        """The project as this job reads it (kiwb.project.teacher_kinds.LoadedProject): its
        config and its teachers' kind, worked out once for the job and passed down."""
        if self._project is None:
            from kiwb.project.teacher_kinds import load_project

            self._project = load_project(self.root)
        return self._project

    def started(self, device) -> None:
        from kiwb.workers.cpu_share import CpuShare
        from kiwb.workers.runtime import device_description, prepare_device

        prepare_device(device)
        self.device = device
        self._cpu = CpuShare(f"job {self.job.id} {self.job.label} in {self.root}")
        shared = self._cpu.join()
        if shared:
            console.print(shared, highlight=False, markup=False)
        self.store.jobs.started(self.job.id, {**device_description(device), "pid": os.getpid(),
                                              "host": socket.gethostname()})

    def finish(self, outcome: Outcome) -> None:
        """Stop the heartbeat, record the ending (freeing the run), restore SIGTERM."""
        self._ending = True
        self._done.set()
        if self._cpu is not None:
            self._cpu.leave()
        if self._heart is not None:
            self._heart.join(timeout=2 * HEARTBEAT_EVERY_S)
        if self.device is not None:
            from kiwb.workers.runtime import device_description, peak_memory_gb

            outcome.data = {**device_description(self.device),
                            "peak_memory_gb": peak_memory_gb(self.device), **outcome.data}
        self.store.jobs.end(self.job.id, outcome.status, {**outcome.data, "exit_code": outcome.exit_code})
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)

    @contextmanager
    def progress(self, description: str, total: int, unit: str = "texts",
                 extra: Callable[[], dict[str, Any]] | None = None) -> Iterator[Callable]:
        """A progress bar whose `advance(label, n)` also records job.progress events (with
        `extra()`'s figures: a distributed job's per-rank counts)."""
        report = _ProgressReport(self.store, self.job.id, total, unit, lines=not console.is_terminal,
                                 memory=self._memory_reading(), extra=extra)
        with progress_bar(description, total=total, unit=unit, lines=False) as bar:
            def advance(label: str, amount: int) -> None:
                bar(label, amount)
                report.advance(label, amount)

            yield advance
        report.record()

    def _memory_reading(self) -> Callable[[], float | None] | None:
        """On CUDA, the peak GPU memory so far (GB), for progress records; None elsewhere."""
        if self.device is None or self.device.type != "cuda":
            return None
        from kiwb.workers.runtime import peak_memory_gb

        return lambda: peak_memory_gb(self.device)

    def _on_sigterm(self, signum, frame) -> None:
        if self._ending:
            return
        # Counted, not read from `_stop`: the heartbeat thread may already have set `_stop`
        # from the store's cancel request that this very SIGTERM came with.
        self._sigterms += 1
        if self._sigterms > 1:
            raise KeyboardInterrupt("a second cancel: stopping at once")
        self._stop.set()  # the heartbeat thread records it; a handler must not use the store

    def _beat_until_done(self) -> None:
        # Its own connection: SQLite connections are not shared between threads.
        with Store(self.store.path) as store:
            while not self._done.wait(HEARTBEAT_EVERY_S):
                try:
                    self._beat(store)
                except sqlite3.Error as error:  # a busy store must not end the heartbeat
                    print(f"kiwb: heartbeat of job {self.job.id} failed: {error}", file=sys.stderr)

    def _beat(self, store: Store) -> None:
        store.jobs.beat(self.job.id)
        requested = store.jobs.cancel_requested(self.job.id)
        if requested == self._stop.is_set():
            return
        if not requested:
            store.jobs.request_cancel(self.job.id, by="SIGTERM")
        self._stop.set()
        console.print(f"job {self.job.id}: cancel requested; stopping after the current batch")


class _ProgressReport:
    """job.progress events at most once a second, and a plain line now and then for logs."""

    def __init__(self, store: Store, job_id: int, total: int, unit: str, lines: bool,
                 memory: Callable[[], float | None] | None = None,
                 extra: Callable[[], dict[str, Any]] | None = None):
        self.store, self.job_id, self.total, self.unit, self.lines = store, job_id, total, unit, lines
        self.memory, self.extra = memory, extra
        self.done, self.label = 0, ""
        self.started = self.last_event = self.last_line = time.monotonic()

    def advance(self, label: str, amount: int) -> None:
        self.done, self.label = self.done + amount, label
        now = time.monotonic()
        if now - self.last_event >= PROGRESS_EVENT_EVERY_S:
            self.record()
        if self.lines and now - self.last_line >= LOG_LINE_EVERY_S:
            self.last_line = now
            console.print(progress_line(self.figures()), highlight=False, markup=False, soft_wrap=True)

    def figures(self) -> dict[str, Any]:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else None
        figures = {"done": self.done, "total": self.total, "unit": self.unit, "label": self.label,
                   "rate": round(rate, 3), "eta_s": None if eta is None else round(eta, 1)}
        if self.memory is not None:  # so a job that dies still left its GPU memory behind
            figures["peak_memory_gb"] = self.memory()
        if self.extra is not None:
            figures.update(self.extra())
        return figures

    def record(self) -> None:
        self.last_event = time.monotonic()
        self.store.jobs.record_progress(self.job_id, self.figures())
