"""Small widgets shared by the panes: a plot over a pure renderer, and table syncing."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable, Static


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
    """A DataTable whose header keeps up with its columns.

    Textual 8's DataTable widens a column on its next idle after new cells arrive, but keeps
    the lines it rendered before: the header (rendered once, while the table was still
    empty) then stayed at the old widths above rows drawn at the new ones, about one time
    in three. Its caches are dropped whenever the column widths it renders with change.
    """

    _rendered_widths: tuple[int, ...] = ()

    def render_lines(self, crop):
        widths = tuple(column.get_render_width(self) for column in self.columns.values())
        if widths != self._rendered_widths:
            self._rendered_widths = widths
            self._clear_caches()
        return super().render_lines(crop)


def sync_rows(table: DataTable, rows: dict[Hashable, Sequence[RenderableType]]) -> None:
    """Make `table` show `rows` (by key, in order) keeping the cursor: cells are updated in
    place, new rows added, vanished rows removed."""
    current = {key.value for key in table.rows}
    for key in current - set(rows):
        table.remove_row(key)
    columns = list(table.columns)
    for key, cells in rows.items():
        if key not in current:
            table.add_row(*cells, key=key)
            continue
        for column, old, new in zip(columns, table.get_row(key), cells, strict=False):
            if old != new:  # an unchanged cell is left alone: no redraw each poll
                table.update_cell(key, column, new)


def show(static: Static, content: RenderableType) -> None:
    """Update a Static only when what it shows changes (each poll would re-layout it)."""
    if static.content != content:
        static.update(content)
