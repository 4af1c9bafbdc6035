"""Terminal output for the CLI: progress bars with rate and ETA, and summary tables."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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

console = Console(stderr=True)
stdout = Console()


class RateColumn(ProgressColumn):
    """Items per second, in the unit the task names."""

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        unit = task.fields.get("unit", "it")
        return Text(f"{speed:,.1f} {unit}/s" if speed else f"– {unit}/s", style="progress.data.speed")


@contextmanager
def progress_bar(description: str, total: int, unit: str = "texts") -> Iterator:
    """A progress bar; yields `advance(description, n)`."""
    columns = (
        TextColumn("[progress.description]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TaskProgressColumn(), RateColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total, unit=unit)

        def advance(label: str, amount: int) -> None:
            progress.update(task, advance=amount, description=label)

        yield advance
