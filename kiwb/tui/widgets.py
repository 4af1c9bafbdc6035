"""Small widgets shared by the panes: a plot over a pure renderer, and tables that fit
their cells (and syncing their rows)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from rich.console import RenderableType
from rich.markup import escape
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.render import measure
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.widgets._data_table import default_cell_formatter


@dataclass(frozen=True)
class PlotStyles:
    """The theme's plot colours as Rich styles, handed to the pure renderers."""

    bar: Style
    alt: Style
    right: Style
    wrong: Style
    marker: Style
    title: Style


Draw = Callable[[int, PlotStyles], RenderableType]


class Plot(Widget):
    """A title line over whatever `draw(width, styles)` renders; redrawn on resize and theme."""

    DEFAULT_CSS = """
    Plot { height: auto; width: 1fr; padding: 0 1; }
    Plot > .plot--bar { color: $kiwb-plot; }
    Plot > .plot--alt { color: $kiwb-plot-alt; }
    Plot > .plot--right { color: $kiwb-right; }
    Plot > .plot--wrong { color: $kiwb-wrong; }
    Plot > .plot--marker { color: $kiwb-threshold; text-style: bold; }
    Plot > .plot--title { text-style: bold; }
    """
    COMPONENT_CLASSES = {"plot--bar", "plot--alt", "plot--right", "plot--wrong", "plot--marker",
                         "plot--title"}

    def __init__(self, title: str = "", *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self._title = title
        self._draw: Draw | None = None
        self._lines = 1

    def on_mount(self) -> None:
        # The plot colours are component styles: redraw with the new ones on a theme change.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def show(self, title: str, draw: Draw | None, lines: int) -> None:
        """Draw with `draw` in `lines` rows under `title` (None: the title alone, as a note)."""
        self._title, self._draw, self._lines = title, draw, lines
        self.styles.height = 1 + (lines if draw else 0)
        self.refresh()

    def styles_for_plots(self) -> PlotStyles:
        style = self.get_component_rich_style
        return PlotStyles(bar=style("plot--bar"), alt=style("plot--alt"), right=style("plot--right"),
                          wrong=style("plot--wrong"), marker=style("plot--marker"),
                          title=style("plot--title"))

    def render(self) -> RenderableType:
        styles = self.styles_for_plots()
        title = Text(self._title, styles.title, no_wrap=True, overflow="ellipsis")
        if self._draw is None:
            return title
        from rich.console import Group

        return Group(title, self._draw(max(self.content_size.width, 1), styles))


class Table(DataTable):
    """A DataTable whose columns fit what they show, cut with an ellipsis where it is too narrow.

    Each column is as wide as its widest cell where they all fit; otherwise the widest are
    cut to one width (`fit_widths`) and their cells end in "…". It hooks into DataTable's own
    methods as of Textual 8.2 (`_update_dimensions`, `_compute_row_renderables`,
    `default_cell_formatter`); tests/test_tui_units.py checks what it draws.
    """

    def add_row(self, *cells, **options):
        return super().add_row(*map(plain, cells), **options)

    def update_cell(self, row_key, column_key, value, *, update_width: bool = True) -> None:
        value = plain(value)
        # DataTable keeps a column's width on update_cell unless asked: a job that went from
        # queued to finished showed `finish`. But asked, it measures the whole column again
        # whenever the new cell is narrower than it (20 µs a row: 40 ms a label given among
        # 2,000 conflicts), which changes nothing unless the old cell was the widest.
        column = self.columns.get(column_key)  # a key or its string
        if update_width and column is not None and row_key in self.rows:
            widest = max(self._cell_width(self.get_cell(row_key, column_key)),
                         self._cell_width(value))
            update_width = widest >= column.content_width
        super().update_cell(row_key, column_key, value, update_width=update_width)

    def update_cell_at(self, coordinate, value, *, update_width: bool = True) -> None:
        super().update_cell_at(coordinate, plain(value), update_width=update_width)

    def _cell_width(self, cell) -> int:
        """A one-line cell's width as DataTable measures it."""
        return measure(self.app.console, default_cell_formatter(cell, wrap=False, height=1), 1)

    def clear(self, columns: bool = False):
        # DataTable keeps each column as wide as the widest cell it ever held: start again
        # from the header, so a table refilled with shorter rows narrows.
        super().clear(columns)
        for column in self.columns.values():
            column.content_width = column.label.cell_len
        return self

    def render_lines(self, crop):
        self._fit_columns()  # the room may have changed: a resize, a scrollbar shown or gone
        return super().render_lines(crop)

    def _update_dimensions(self, new_rows) -> None:
        super()._update_dimensions(new_rows)  # cells measured, the scrollable size set from them
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Draw the columns at the widths that fit the room the table has now."""
        columns = list(self.columns.values())
        room = self.scrollable_content_region.width
        if not columns or room <= 0:  # not laid out yet
            return
        # Row labels and the padding either side of each cell; the last column's right padding
        # may go past the edge, a cell more for the text.
        taken = self._row_label_column_width + 2 * self.cell_padding * len(columns)
        widths = fit_widths([column.content_width for column in columns],
                            room - taken + self.cell_padding)
        if any(column.auto_width or column.width != width
               for column, width in zip(columns, widths, strict=True)):
            for column, width in zip(columns, widths, strict=True):
                column.auto_width, column.width = False, width
            # DataTable keeps the lines it rendered: the header, rendered once while the table
            # was still empty, stayed at the old widths above rows drawn at the new ones.
            self._clear_caches()
        total = sum(widths) + taken
        scroll_width = min(total, room) if total <= room + self.cell_padding else total
        if self.virtual_size.width != scroll_width:
            self.virtual_size = Size(scroll_width, self.virtual_size.height)

    def _compute_row_renderables(self, row_index: int):
        # A cell (or header) wider than its column ends in "…" rather than just stopping.
        renderables = super()._compute_row_renderables(row_index)
        return renderables._replace(cells=[_with_ellipsis(cell) for cell in renderables.cells])


def plain(cell):
    """A cell as it is shown: a string as plain text. DataTable reads strings as Rich markup,
    and cells hold what users wrote: a conflict text with `[/r/news]` in it crashed the table,
    `a [b] c` lost its `[b]`."""
    return escape(cell) if isinstance(cell, str) else cell


def _with_ellipsis(cell: RenderableType) -> RenderableType:
    if not isinstance(cell, Text) or cell.overflow == "ellipsis":
        return cell
    cut = cell.copy()  # the formatter hands back a Text cell itself: leave the stored one be
    cut.overflow = "ellipsis"
    return cut


def fit_widths(widths: Sequence[int], room: int, narrowest: int = 4) -> list[int]:
    """Column widths that fit in `room` cells: each its own where they all fit; otherwise the
    widest are cut to one common width, no narrower than `narrowest` (the table then scrolls)."""
    if sum(widths) <= room:
        return list(widths)
    spent, cap, spare = 0, 0, 0
    for number, width in enumerate(sorted(widths)):
        wider = len(widths) - number  # this column and those at least as wide
        if spent + width * wider > room:  # these are cut, sharing what the narrower leave
            cap, spare = divmod(room - spent, wider)
            break
        spent += width
    if cap < narrowest:
        return [min(width, narrowest) for width in widths]
    fitted = [min(width, cap) for width in widths]
    cut = [number for number, width in enumerate(widths) if width > cap]
    for number in cut[:spare]:  # the cells left over go to the first cut columns
        fitted[number] += 1
    return fitted


def sync_rows(table: DataTable, rows: dict[Hashable, Sequence[RenderableType]]) -> None:
    """Make `table` show `rows` (by key, in order) keeping the cursor: cells are updated in
    place (their columns widened or narrowed to fit), new rows added, vanished rows removed."""
    current = {key.value for key in table.rows}
    for key in current - set(rows):
        table.remove_row(key)
    columns = list(table.columns)
    for key, cells in rows.items():
        if key not in current:
            table.add_row(*cells, key=key)
            continue
        for column, old, new in zip(columns, table.get_row(key), cells, strict=False):
            if old != plain(new):  # an unchanged cell is left alone: no redraw each poll
                table.update_cell(key, column, new, update_width=True)


def show(static: Static, content: RenderableType) -> None:
    """Update a Static only when what it shows changes (each poll would re-layout it)."""
    if static.content != content:
        static.update(content)
