"""Rank 0's watch over a job's ranks: a collective that never returns must not keep a job
"running".

With gloo a dead peer's closed connection makes the waiting collective raise at once. With
NCCL it does not: rank 0's all-reduce waits for the dead rank until the group's timeout, and
under torchrun the SIGTERM its agent sends meanwhile never reaches a Python handler, since
rank 0's main thread is blocked in C++. So a thread beside the work watches
- the ranks this worker started: when one exits with a failure, it aborts the process group
  (the blocked collective then raises in the main thread, which records the job `lost` with
  that rank's log tail);
- under torchrun, SIGTERM while the main thread waits in a collective (read from the signal
  wakeup pipe, which the C-level handler writes whatever the main thread is doing): the group
  is aborted the same way, unless `kiwb cancel` sent it (it records the request first), which
  the job honours at its next step or round as it always did.
If the main thread stays blocked in a collective GIVE_UP_AFTER_S after the abort, the watch
records the ending itself and ends the process.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

from kiwb.workers.collectives import abort_ranks, waiting

WATCH_EVERY_S = 0.5
GIVE_UP_AFTER_S = 20.0


class RankWatch:
    """A context around rank 0's work: `dead` is the started rank found dead, if any.

    `give_up(dead)` records the job's ending from the watch's thread when the main thread
    stays blocked after the abort (it must open its own store connection); the process then
    exits."""

    def __init__(self, spawned: list, give_up: Callable[[object | None], None], *,
                 torchrun: bool = False, cancelled: Callable[[], bool] | None = None,
                 every_s: float = WATCH_EVERY_S, give_up_after_s: float = GIVE_UP_AFTER_S):
        self.spawned, self.give_up, self.torchrun = spawned, give_up, torchrun
        self.cancelled = cancelled  # whether the job's cancel was asked for (kiwb cancel)
        self.every_s, self.give_up_after_s = every_s, give_up_after_s
        self.dead = None
        self.aborted = False
        # SIGTERMs read and left to the job (its cancel, or one outside a collective)
        self.sigterms_left = 0
        self._over = threading.Event()
        self._thread: threading.Thread | None = None
        self._pipe: tuple[int, int] | None = None
        self._old_wakeup = -1

    def __enter__(self) -> RankWatch:
        if self.torchrun and threading.current_thread() is threading.main_thread():
            read, write = os.pipe()
            os.set_blocking(write, False)
            os.set_blocking(read, False)
            self._old_wakeup = signal.set_wakeup_fd(write)
            self._pipe = (read, write)
        if self.spawned or self._pipe:
            self._thread = threading.Thread(target=self._watch, name="kiwb-rank-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._over.set()  # the main thread is out of its collectives: nothing to give up on
        if self._thread is not None:
            self._thread.join(timeout=2 * self.every_s + 1)
        if self._pipe is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            for end in self._pipe:
                os.close(end)

    def _watch(self) -> None:
        while not self._over.is_set():
            if self._pipe is not None:
                ready, _, _ = select.select([self._pipe[0]], [], [], self.every_s)
                if ready and self._terminated():
                    if not self._asked_to_cancel() and self._still_waiting():
                        self._abort("torchrun ended this rank (SIGTERM) while it waited for "
                                    "the other ranks")
                        return
                    self.sigterms_left += 1
            else:
                self._over.wait(self.every_s)
            dead = next((rank for rank in self.spawned
                         if rank.process.poll() not in (None, 0)), None)
            if dead is not None and not self._over.is_set():
                self.dead = dead
                self._abort(f"rank {dead.rank} ({dead.device}) "
                            f"{how_it_ended(dead.process.returncode)}")
                return

    def _terminated(self) -> bool:
        try:
            got = os.read(self._pipe[0], 512)
        except BlockingIOError:
            return False
        return signal.SIGTERM in got

    def _asked_to_cancel(self) -> bool:
        """A SIGTERM from `kiwb cancel` (which records the request before it signals) is the
        job's to honour at its next boundary, not torchrun tearing the ranks down."""
        try:
            return bool(self.cancelled is not None and self.cancelled())
        except Exception:  # noqa: BLE001  (a busy store: take it for torchrun's, as before)
            return False

    def _still_waiting(self) -> bool:
        """Whether the main thread stays in a collective: a Python handler that can run (the
        job's own cancel) gets a moment to."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if not waiting.is_set():
                return False
            time.sleep(0.05)
        return True

    def _abort(self, why: str) -> None:
        print(f"kiwb: {why}; aborting the ranks' collectives", file=sys.stderr, flush=True)
        self.aborted = True
        abort_ranks()
        # Only time spent blocked in a collective counts: a main thread still computing (its
        # own shard, its own step) meets the aborted group at its next collective, which
        # raises at once, and records the ending itself.
        blocked = 0.0
        while not self._over.wait(self.every_s):
            blocked = blocked + self.every_s if waiting.is_set() else 0.0
            if blocked >= self.give_up_after_s:
                break
        else:
            return
        print(f"kiwb: the job's main thread is still blocked {self.give_up_after_s:g} s after "
              "the abort; recording the job's ending from here", file=sys.stderr, flush=True)
        try:
            self.give_up(self.dead)
        finally:
            os._exit(1)


def how_it_ended(returncode: int) -> str:
    """A process's ending, as a lost job's record says it."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"
