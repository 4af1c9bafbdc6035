"""Running the real `kiwb` CLI in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def kiwb_env() -> dict[str, str]:
    env = dict(os.environ)
    # One thread per process: tests run several processes at once on few cores, and
    # oversubscribed BLAS threads make tiny models tens of times slower.
    env.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
                "COLUMNS": "120", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    return env


def run_kiwb(*args: str, cwd: Path, check: bool = True, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run `python -m kiwb ARGS` and return the finished process (stdout/stderr as text)."""
    result = subprocess.run(
        [sys.executable, "-m", "kiwb", *map(str, args)], cwd=cwd, env=kiwb_env(),
        capture_output=True, text=True, timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kiwb {' '.join(map(str, args))} failed ({result.returncode}):\n{result.stderr}")
    return result


def start_kiwb(*args: str, cwd: Path, log: Path) -> subprocess.Popen:
    """Start `python -m kiwb ARGS` in the background, its output going to `log`."""
    handle = open(log, "wb")  # noqa: SIM115 - owned by the child process
    return subprocess.Popen(
        [sys.executable, "-m", "kiwb", *map(str, args)], cwd=cwd, env=kiwb_env(),
        stdout=handle, stderr=subprocess.STDOUT,
    )


def write_project(root: Path, teachers: dict[str, Path], unlabeled: Path, evaluation: Path | None = None,
                  scoring: str = "mc_passes = 4\nshard_size = 16\n", extra: str = "") -> Path:
    """A kiwb.toml written by hand, with small scoring settings for fast tests."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ['name = "test"']
    for name, path in teachers.items():
        lines += ["[[teachers]]", f'name = "{name}"', f'path = "{path}"']
    lines += ["[data.unlabeled]", f'path = "{unlabeled}"']
    if evaluation is not None:
        lines += ["[data.eval]", f'path = "{evaluation}"', 'label_column = "label"']
    lines += ["[scoring]", scoring, extra]
    (root / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


class Deadline:
    """The end of a wait for `what`: every polling loop of the tests checks one, so a wait
    ends on what it waits for, never on a sleep thought long enough."""

    def __init__(self, timeout: float, what: str):
        self.timeout, self.what = timeout, what
        self.end = time.monotonic() + timeout

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def check(self) -> None:
        """Fail, naming what was waited for, once the time is up."""
        assert not self.expired, f"timed out after {self.timeout:g} s waiting for {self.what}"


def wait_until(condition, *, timeout: float, what: str, every: float = 0.2):
    """Poll `condition()` until it returns something true (returned), or fail naming `what`."""
    deadline = Deadline(timeout, what)
    while not (found := condition()):
        deadline.check()
        time.sleep(every)
    return found


def wait_until_waiting(pid: int, *, timeout: float, what: str) -> None:
    """Until process `pid` (all its threads) uses next to no CPU over half a second: it waits
    (in a collective, on a lock) instead of computing. Read from /proc (Linux)."""

    def cpu_ticks() -> int:
        after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(after_name[11]) + int(after_name[12])  # utime + stime, in clock ticks

    def waiting() -> bool:
        before = cpu_ticks()
        time.sleep(0.5)
        return cpu_ticks() - before <= 2  # 20 ms of 500: a heartbeat, not a step

    wait_until(waiting, timeout=timeout, what=what, every=0)


def rank_pid(log: Path) -> int:
    """The pid a rank that a --devices job started wrote in the first line of its log."""
    return int(next(line for line in log.read_text().splitlines()
                    if " · pid " in line).split(" · pid ")[1].split()[0])


def ended_job(project: Path, job_id: int, timeout: float = 120):
    """The job's state once it is no longer live."""
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    def ended():
        with Store(ProjectPaths(project).store) as store:
            state = store.jobs.get(job_id)
        return None if state.live else state

    return wait_until(ended, timeout=timeout, what=f"job {job_id} to end")
