"""Pure renderers: lists of numbers in, Rich `Text` out (histograms, bars, sparklines).

No Textual here: the plot widgets hold data and styles and call these, so every drawing
is unit-tested on its own. Styles are passed in, so a theme change only redraws.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from rich.style import Style
from rich.table import Table
from rich.text import Text

UP = " ▁▂▃▄▅▆▇█"        # bars growing up, in eighths of a cell
RIGHT = " ▏▎▍▌▋▊▉█"     # bars growing right, in eighths of a cell
DOWN = " ▀█"             # bars growing down, in halves of a cell (no finer glyphs exist)
MARKER = "┊"

StyleType = str | Style


def bucket(values: Sequence[float], width: int) -> list[float]:
    """`values` (histogram bins) laid over `width` columns: bins repeat when there is room
    and are summed when there is not, so the area under a histogram keeps its meaning."""
    count = len(values)
    if count == 0 or width <= 0:
        return [0.0] * max(width, 0)
    if width >= count:
        return [float(values[column * count // width]) for column in range(width)]
    return [float(sum(values[column * count // width:(column + 1) * count // width]))
            for column in range(width)]


def _levels(values: Sequence[float], top: float, cells: int, steps: int) -> list[int]:
    """Bar heights in `steps`ths of a cell; any non-zero value gets at least one step."""
    if top <= 0:
        return [0] * len(values)
    levels = []
    for value in values:
        level = round(value / top * cells * steps)
        levels.append(max(level, 1) if value > 0 else 0)
    return levels


def axis(width: int, low: str = "0", middle: str = "0.5", high: str = "1") -> str:
    """An x-axis label row: `low` at the left, `middle` in the centre, `high` at the right."""
    if width < len(low) + len(high) + 1:
        return low[:width].ljust(width)
    row = [" "] * width
    row[:len(low)] = low
    row[width - len(high):] = high
    start = (width - len(middle)) // 2
    if width >= len(low) + len(middle) + len(high) + 2:
        row[start:start + len(middle)] = middle
    return "".join(row)


def marker_column(marker: float | None, width: int) -> int | None:
    """The column of a value in [0, 1] on a [0, 1] axis `width` columns wide."""
    if marker is None or width <= 0:
        return None
    return min(width - 1, max(0, int(marker * width)))


def histogram(counts: Sequence[float], width: int, height: int, *, style: StyleType = "",
              marker: float | None = None, marker_style: StyleType = "",
              show_axis: bool = True) -> Text:
    """Vertical bars of `counts` (bins over [0, 1]) filling width × height cells.

    With `marker`, the column holding that value is drawn in `marker_style`, with a dotted
    line where it has no bar (the conflict threshold on the margin histogram).
    """
    rows = max(height - (1 if show_axis else 0), 1)
    values = bucket(counts, width)
    levels = _levels(values, max(values, default=0), rows, 8)
    mark = marker_column(marker, width)
    text = Text()
    for row in range(rows):
        if row:
            text.append("\n")
        floor = (rows - 1 - row) * 8
        for column, level in enumerate(levels):
            cell = UP[min(max(level - floor, 0), 8)]
            if column == mark:
                text.append(MARKER if cell == " " else cell, marker_style)
            else:
                text.append(cell, style)
    if show_axis:
        text.append("\n")
        text.append(axis(width), "dim")
    return text


def mirrored_histogram(upper: Sequence[float], lower: Sequence[float], width: int, height: int,
                       *, upper_style: StyleType = "", lower_style: StyleType = "",
                       marker: float | None = None, marker_style: StyleType = "") -> Text:
    """Two histograms over [0, 1] on one axis: `upper` grows up, `lower` grows down.

    Each is normalised to its own total, so groups of different sizes compare by shape
    (the paper's figure 2: right teacher above, wrong teacher below). With `marker`, the
    column holding that value is drawn in `marker_style` above and below the axis, dotted
    where it has no bar (a teacher's routing split).
    """
    half = max((height - 1) // 2, 1)
    top_values = _shares(bucket(upper, width))
    bottom_values = _shares(bucket(lower, width))
    top = max(top_values + bottom_values, default=0)
    mark = marker_column(marker, width)

    def row_of(cells: list[str], style: StyleType) -> Text:
        row = Text()
        for column, cell in enumerate(cells):
            if column == mark:
                row.append(MARKER if cell == " " else cell, marker_style)
            else:
                row.append(cell, style)
        return row

    text = Text()
    up = _levels(top_values, top, half, 8)
    for row in range(half):
        floor = (half - 1 - row) * 8
        text.append_text(row_of([UP[min(max(level - floor, 0), 8)] for level in up], upper_style))
        text.append("\n")
    text.append(axis(width), "dim")
    down = _levels(bottom_values, top, half, 2)
    for row in range(half):
        text.append("\n")
        floor = row * 2
        text.append_text(row_of([DOWN[min(max(level - floor, 0), 2)] for level in down],
                                lower_style))
    return text


def _shares(values: list[float]) -> list[float]:
    total = sum(values)
    return [value / total for value in values] if total > 0 else values


def hbar(fraction: float, width: int) -> str:
    """A horizontal bar `fraction` (clipped to [0, 1]) of `width` cells, in eighths."""
    eighths = round(min(max(fraction, 0.0), 1.0) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (RIGHT[rest] if rest else "")).ljust(width)


def sparkline(values: Sequence[float], width: int, *, style: StyleType = "") -> Text:
    """One row of eighth blocks from the lowest to the highest value; averages when too long."""
    if not values or width <= 0:
        return Text("".ljust(max(width, 0)))
    count = len(values)
    if count > width:
        values = [sum(values[c * count // width:(c + 1) * count // width])
                  / len(values[c * count // width:(c + 1) * count // width]) for c in range(width)]
    low, high = min(values), max(values)
    span = high - low
    cells = "".join(UP[8 if span == 0 else 1 + round((value - low) / span * 7)] for value in values)
    return Text(cells, style)


def labelled_bars(rows: Sequence[tuple[str, float | None]], width: int, *, style: StyleType = "",
                  missing: str = "–") -> Text:
    """One line per (label, fraction in [0, 1] or None): name, bar, percentage."""
    if not rows:
        return Text()
    name_width = min(max(len(label) for label, _ in rows), max(width // 3, 4))
    bar_width = max(width - name_width - 8, 1)
    text = Text()
    for number, (label, value) in enumerate(rows):
        if number:
            text.append("\n")
        text.append(label[:name_width].ljust(name_width) + " ")
        if value is None:
            text.append(" " * bar_width + f" {missing:>6}", "dim")
        else:
            text.append(hbar(value, bar_width), style)
            text.append(f" {100 * value:5.1f}%")
    return text


def distribution(labels: Sequence[str], mc_probs: Sequence[float], det_probs: Sequence[float],
                 width: int, *, mc_style: StyleType = "", det_style: StyleType = "") -> Text:
    """A teacher's two distributions over its labels: MC-dropout mean and deterministic."""
    name_width = min(max((len(label) for label in labels), default=4), max(width // 4, 4))
    bar_width = max((width - name_width - 16) // 2, 1)
    text = Text()
    for number, (label, mc, det) in enumerate(zip(labels, mc_probs, det_probs, strict=True)):
        if number:
            text.append("\n")
        text.append(label[:name_width].ljust(name_width) + " ")
        text.append(hbar(mc, bar_width), mc_style)
        text.append(f" {mc:5.3f}  ")
        text.append(hbar(det, bar_width), det_style)
        text.append(f" {det:5.3f}")
    return text


def confusion_table(labels: Sequence[str], matrix: Sequence[Sequence[int]], *,
                    diagonal_style: StyleType = "bold", title: str | None = None) -> Table:
    """Gold labels down, predictions across; the diagonal (correct) in `diagonal_style`."""
    table = Table(title=title, show_edge=False, pad_edge=False, box=None, padding=(0, 1))
    table.add_column("gold \\ pred", style="dim", no_wrap=True)
    for label in labels:
        table.add_column(label[:8], justify="right", no_wrap=True)
    for row, (label, counts) in enumerate(zip(labels, matrix, strict=True)):
        cells = [Text(str(value), diagonal_style if column == row else "")
                 for column, value in enumerate(counts)]
        table.add_row(label, *cells)
    return table


def rows_table(rows: Sequence[Mapping[str, str]], *, title: str | None = None,
               left: Collection[str] = ()) -> Table:
    """Rows of text cells under their keys as headers; the columns named in `left` align left,
    the others (figures) right. Where the table is wider than its room, a header or a cell
    wraps at its spaces instead of being cut short."""
    table = Table(title=title, show_edge=False, pad_edge=False, box=None, padding=(0, 1),
                  title_justify="left")
    for name in (rows[0] if rows else {}):
        table.add_column(name, justify="left" if name in left else "right", overflow="fold")
    for row in rows:
        table.add_row(*row.values())
    return table


def side_by_side(blocks: Sequence[Text], widths: Sequence[int], gap: int = 2) -> Text:
    """Blocks of lines placed next to each other, each padded to its width."""
    split = [block.split("\n", allow_blank=True) for block in blocks]
    height = max((len(lines) for lines in split), default=0)
    text = Text()
    for row in range(height):
        if row:
            text.append("\n")
        for column, (lines, width) in enumerate(zip(split, widths, strict=True)):
            if column:
                text.append(" " * gap)
            line = lines[row].copy() if row < len(lines) else Text()
            line.truncate(width, pad=True)
            text.append_text(line)
    return text
