"""The one place the workbench starts and stops work: the same functions the CLI calls.

Scoring, training and export are background jobs (`kiwb.launch`), so they outlive the
workbench and show in `kiwb jobs`. Integration is quick and not a job kind: it runs as
`kiwb integrate --json` in a child process, which keeps torch out of this one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError

STOP_CHECK_S = 0.2


def launch(root: Path, kind: str, settings: dict[str, Any]) -> int:
    """Start a detached `score`, `train` or `export` job; returns its id."""
    from kiwb.launch import launch_job

    return launch_job(root, kind, settings)


def cancel(root: Path, job_id: int) -> str:
    """Ask a job to stop after its batch (a second time: at once); says what happened."""
    from kiwb.launch import cancel_job
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    with Store(ProjectPaths(Path(root)).store) as store:
        return cancel_job(store, job_id)


def integrate_command(root: Path, *, method: str | None = None,
                      routing: str | None = None) -> list[str]:
    """The `kiwb integrate ROOT --json` command line; a method or routing given overrides
    the project's."""
    command = [sys.executable, "-m", "kiwb", "integrate", str(root), "--json"]
    if method is not None:
        command += ["--method", method]
    if routing is not None:
        command += ["--routing", routing]
    return command


def integrate(root: Path, *, method: str | None = None, routing: str | None = None,
              should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Run `kiwb integrate ROOT --json` (with `method` and `routing` when given, else the
    project's settings) and return its summary.

    A failure raises KiwbError with the command's own error line; `should_stop` (checked a
    few times a second) ends the child early, so closing the workbench never waits on it.
    """
    command = integrate_command(root, method=method, routing=routing)
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    while True:
        try:
            stdout, stderr = process.communicate(timeout=STOP_CHECK_S)
            break
        except subprocess.TimeoutExpired:  # retrying communicate loses no output
            if should_stop():
                process.terminate()
                process.communicate()
                raise InterruptedError("integration stopped") from None
    if process.returncode != 0:
        raise KiwbError(error_line(stderr) or f"kiwb integrate exited with {process.returncode}")
    return json.loads(stdout)


def error_line(output: str) -> str:
    """The `kiwb: error: ...` line of a command's output, or its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("kiwb: error:"):
            return line.removeprefix("kiwb: error:").strip()
    return lines[-1] if lines else ""
