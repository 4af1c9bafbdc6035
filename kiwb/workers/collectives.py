"""The ranks' collectives, as kiwb calls them: a peer that went away is one error, RankLost,
and rank 0's watch (kiwb.workers.rank_watch) can tell whether the main thread is waiting in
one and abort them all."""

from __future__ import annotations

import os
import sys
import threading

waiting = threading.Event()  # set while this process's main thread waits in a collective
joined = threading.Event()  # set once this process joined a job's ranks (kiwb.workers.ranks)


class RankLost(Exception):
    """A rank stopped answering (it died, or its machine or network went away)."""


def collective(call, doing: str):
    """`call()`, a collective of the job's ranks; a peer that went away (or a group aborted
    by the watch) raises RankLost naming what this rank was `doing`."""
    waiting.set()
    try:
        return call()
    # RuntimeError: gloo's closed connection, NCCL's timeout or abort (DistBackendError);
    # ValueError: the next collective after the watch aborted the group (no default group).
    except (RuntimeError, ValueError) as error:
        raise RankLost(f"{doing}: {error}".splitlines()[0]) from None
    finally:
        waiting.clear()


def abort_ranks() -> None:
    """Abort every process group of this process; safe from another thread, where a blocked
    NCCL collective then raises in the thread that waits on it (torch's own abort is NCCL's;
    gloo's groups ignore it and raise on their own when a peer's connection closes)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    if not dist.is_initialized():
        return
    abort = getattr(dist, "abort_process_group", None) or distributed_c10d._abort_process_group
    try:
        abort()
    except (RuntimeError, ValueError):  # already aborted or destroyed by another thread
        pass


def exit_process(code: int) -> None:
    """End a `python -m` entry point with `code`. A process that joined ranks skips the
    interpreter's teardown (os._exit, after flushing what it printed): torch.distributed's C++
    objects may abort there ("terminate called without an active exception", once under
    torchrun with gloo, after the job had finished and the group was destroyed), which turned
    a finished job into a failed exit status. Everything kiwb keeps is written and closed by
    then: the store's transactions are committed, the ranks have left the group."""
    if not joined.is_set():
        raise SystemExit(code)
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(code)
