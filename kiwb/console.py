"""Terminal output for the CLI: progress bars with rate and ETA, and summary tables."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from kiwb.project.jobs import is_progress_line

console = Console(stderr=True)
stdout = Console()


class RateColumn(ProgressColumn):
    """Items per second, in the unit the task names."""

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        unit = task.fields.get("unit", "it")
        return Text(f"{speed:,.1f} {unit}/s" if speed else f"– {unit}/s", style="progress.data.speed")


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TaskProgressColumn(), RateColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=console, transient=False,
    )


@contextmanager
def progress_bar(description: str, total: int, unit: str = "texts") -> Iterator:
    """A progress bar; yields `advance(description, n)`."""
    with _progress(console) as progress:
        task = progress.add_task(description, total=total, unit=unit)

        def advance(label: str, amount: int) -> None:
            progress.update(task, advance=amount, description=label)

        yield advance


class FollowedJob:
    """A background job followed from this terminal: its log lines as they come, and in a
    terminal a progress bar in place of the plain progress lines it writes to its log."""

    def __init__(self, job_id: int, output: Console = console):
        self.output = output
        self._bar = _progress(output) if output.is_terminal else None
        self._task: Any = None
        self._shape: tuple | None = None
        self._partial = ""  # a line the log has not finished yet
        # The worker's first line names its pid and host: for the log file, not for here.
        self._header = f"kiwb job {job_id} · "

    def __enter__(self) -> FollowedJob:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._partial:
            self.text("\n")
        if self._bar is not None:
            self._bar.stop()

    def text(self, chunk: str) -> None:
        """Log text as read; in a terminal, progress lines give way to the bar."""
        *lines, self._partial = (self._partial + chunk).split("\n")
        for line in lines:
            if line.startswith(self._header):
                continue
            if self._bar is None:
                sys.stderr.write(line + "\n")
            elif not is_progress_line(line):
                self.output.print(line, markup=False, highlight=False, soft_wrap=True)
        sys.stderr.flush()

    def progress(self, record: dict[str, Any]) -> None:
        """A job.progress record; a new total or unit (the job's next phase) starts a new bar."""
        if self._bar is None:
            return
        shape = (record["total"], record["unit"])
        if shape != self._shape:
            self._shape = shape
            self._task = self._bar.add_task(record["label"], total=record["total"], unit=record["unit"])
        self._bar.update(self._task, completed=record["done"], description=record["label"])
