"""Terminal output for the CLI: progress bars with rate and ETA, and summary tables."""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
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
from rich.table import Column, Table
from rich.text import Text

from kiwb.project.jobs import is_progress_line

console = Console(stderr=True)
# As wide as $COLUMNS, else as the terminal on stdin, stdout or stderr, else 80 columns
# (Rich's default: output piped from a script, CI).
stdout = Console()
# Into a file or a pipe (a job's log, CI) a line is written whole: wrapped at 80 columns, a
# command or a path copied from the log would be cut in two. Tables keep their width.
for _each in (console, stdout):
    _each.soft_wrap = not _each.is_terminal


class FittedTable(Table):
    """A table for the CLI that fits a narrow terminal (80 columns by default) by narrowing
    only the columns named `wrap` (their text wraps onto more lines) or `cut` (free text on
    one line, cut with …); every other column keeps the width of its widest cell. Columns
    also named `optional` are left out, the last named first, where the others would not
    fit beside them with a word of theirs on each line.

    A column added later may wrap with Rich's own `add_column(..., no_wrap=False)`."""

    def __init__(self, *headers: str, wrap: Collection[str] = (), cut: Collection[str] = (),
                 optional: Sequence[str] = (), **options: Any):
        self._wrap, self._cut, self._optional = set(wrap), set(cut), tuple(optional)
        super().__init__(*headers, **options)

    def add_column(self, header: RenderableType = "", *args: Any, **options: Any) -> None:
        # Rich narrows the columns that may wrap, widest first, and every column evenly only
        # when that is not enough: a plain Table of short cells beside one long one of
        # no_wrap text squeezes the short ones to nothing. So only the flexible columns wrap.
        flexible = _name(header) in self._wrap | self._cut
        super().add_column(header, *args, **{"no_wrap": not flexible, **options})

    def add_row(self, *cells: RenderableType | None, **options: Any) -> None:
        names = [_name(column.header) for column in self.columns]
        if unknown := sorted((self._wrap | self._cut | set(self._optional)) - set(names)):
            raise ValueError(f"no column {', '.join(map(repr, unknown))} in this table")
        super().add_row(*(_one_line(cell) if index < len(names) and names[index] in self._cut
                          else cell for index, cell in enumerate(cells)), **options)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fitted = self._fitted(console, options)
        if fitted is self:
            yield from super().__rich_console__(console, options)
        else:
            yield fitted

    def _fitted(self, console: Console, options: ConsoleOptions) -> Table:
        """This table, or a copy without the optional columns that leave the others too
        little room."""
        if not self._optional:
            return self
        unbounded = options.update_width(10_000)
        shown = self.columns
        for leaving in (None, *reversed(self._optional)):
            shown = [column for column in shown if _name(column.header) != leaving]
            table = self if len(shown) == len(self.columns) else self._showing(shown)
            spare = sum(_spare(console, unbounded, column) for column in shown
                        if not column.no_wrap)
            if Measurement.get(console, unbounded, table).maximum - spare <= options.max_width:
                break
        return table

    def _showing(self, columns: list[Column]) -> Table:
        table = copy.copy(self)
        table._optional = ()
        table.columns = [dataclasses.replace(column, _index=index)
                         for index, column in enumerate(columns)]
        return table


def _name(header: RenderableType) -> str | None:
    return header if isinstance(header, str) else None


def _spare(console: Console, options: ConsoleOptions, column: Column) -> int:
    """How much narrower than its widest line a column that wraps can be: down to its
    longest word."""
    widths = [Measurement.get(console, options, cell) for cell in (column.header, *column.cells)]
    return max(width.maximum for width in widths) - max(width.minimum for width in widths)


def _one_line(cell: RenderableType | None) -> RenderableType | None:
    """A cut column's cell: its text on one line, cut with … where the column is narrower
    (plain text, never markup: such a column holds what users wrote)."""
    if isinstance(cell, str):
        return Text(cell, no_wrap=True, overflow="ellipsis")
    if isinstance(cell, Text):
        cell = cell.copy()
        cell.no_wrap, cell.overflow = True, "ellipsis"
    return cell


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


PROGRESS_LINE_EVERY_S = 10.0  # where the output is no terminal: a plain line this often


@contextmanager
def progress_bar(description: str, total: int, unit: str = "texts", lines: bool = True) -> Iterator:
    """A progress bar; yields `advance(description, n)`. Where the output is no terminal (a
    log, a pipe) the bar cannot redraw, so with `lines` a plain progress line is printed every
    PROGRESS_LINE_EVERY_S seconds as well (a job prints its own: lines=False)."""
    import time

    from kiwb.project.jobs import progress_line

    started = last = time.monotonic()
    done = 0
    plain = lines and not console.is_terminal

    def line(label: str) -> None:
        elapsed = max(time.monotonic() - started, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else None
        console.print(progress_line({"label": label, "done": done, "total": total, "unit": unit,
                                     "rate": rate, "eta_s": eta}), highlight=False, markup=False)

    with _progress(console) as progress:
        task = progress.add_task(description, total=total, unit=unit)

        def advance(label: str, amount: int) -> None:
            nonlocal done, last
            progress.update(task, advance=amount, description=label)
            done += amount
            if plain and time.monotonic() - last >= PROGRESS_LINE_EVERY_S:
                last = time.monotonic()
                line(label)

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


def one_line(text: str) -> str:
    """A text's whitespace runs (tabs, line breaks) as single spaces: how `kiwb predict` shows
    a text beside its answers, whose fields a tab separates and a line ends."""
    return " ".join(text.split())
