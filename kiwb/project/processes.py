"""Whether a process recorded in the store still runs on this host, on Linux and macOS alike.

A pid alone is not enough: once a process ends, the system may give its pid to another. So
the store records each worker's start time beside its pid, as `process_start` writes it, and
`process_running` checks both.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

# The start time is the process's creation time in seconds since the epoch, which psutil
# reads on every platform. On Linux it is derived from the boot time, which moves when the
# system clock is stepped, so two readings of one process may differ slightly: a second
# absorbs that, and no system hands out the same pid again within a second of its first use.
_SAME_START_S = 1.0


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid is running on this host (zombies count as ended)."""
    if not pid or pid <= 0:  # psutil shows pid 0 (the kernel's) as alive; no worker has it
        return False
    try:
        # An exited child lives on as a zombie until its parent reaps it.
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def process_start(pid: int | None) -> str | None:
    """When a process started (seconds since the epoch, as text with a decimal point), which
    tells it apart from a later process given the same pid; None where it cannot be read."""
    seconds = _start_seconds(pid)
    return None if seconds is None else f"{seconds:.3f}"


def process_running(pid: int | None, start: str | None) -> bool:
    """Whether the process recorded as (pid, start) still runs on this host; a process that
    was later given the same pid does not count."""
    if not pid_alive(pid):
        return False
    recorded = _recorded_start(start)
    if recorded is None:
        return True
    current = _start_seconds(pid)
    return current is None or abs(current - recorded) < _SAME_START_S


def _start_seconds(pid: int | None) -> float | None:
    if not pid or pid <= 0:
        return None
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _recorded_start(start: str | None) -> float | None:
    """A recorded start time in seconds since the epoch, or None where none was recorded (the
    store's version 7 made the clock ticks older kiwb wrote unknown, kiwb.project.schema)."""
    if start is None:
        return None
    try:
        return float(start)
    except ValueError:
        return None


def with_this_kiwb(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child `python -m kiwb...` that imports the kiwb this process runs: its
    folder first on PYTHONPATH. Without it a worker starts in the project folder and finds
    whatever kiwb is installed there, or none: a checkout run from its own folder, or an
    editable install moved since, started workers that failed with "No module named kiwb"
    or ran other code than the command that launched them."""
    import site

    import kiwb

    here = str(Path(kiwb.__file__).resolve().parent.parent)
    # An installed kiwb is found by the child's own site-packages; put there on PYTHONPATH,
    # that folder would come before the standard library and shadow it with any backport.
    # (getsitepackages is missing from some virtualenvs' site module)
    sites = {str(Path(folder).resolve()) for folder in
             [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]}
    if here in sites:
        return env
    paths = [here] + [path for path in env.get("PYTHONPATH", "").split(os.pathsep)
                      if path and path != here]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}
