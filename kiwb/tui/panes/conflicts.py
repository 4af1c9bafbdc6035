"""Conflicts: texts whose two most confident teachers are close, lowest margin first.

The list is paged from the store by keyset (margin, row), a page at a time as the cursor
nears the end, so a million scored texts never load at once; counting runs beside it.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import DataTable, Input, Select, Static

from kiwb.project.instances import Instance, InstanceFilter
from kiwb.project.paths import ProjectPaths
from kiwb.project.queries import (
    StoreChanges,
    conflict_count,
    conflict_page,
    open_store,
    teacher_views,
)
from kiwb.project.records import IntegrationRecord
from kiwb.tui.background import cancelled, run_in_thread
from kiwb.tui.conflicts_csv import export_conflicts
from kiwb.tui.messages import (
    ActionFailed,
    ConflictScores,
    ConflictsCounted,
    ConflictsExported,
    ConflictsPage,
)
from kiwb.tui.panes.base import Pane
from kiwb.tui.screens.detail import ConflictDetailScreen
from kiwb.tui.widgets import Table

PAGE = 200
FETCH_WHEN_LEFT = 40   # rows below the cursor when the next page is asked for
TEXT_CHARS = 160
SEARCH_DELAY_S = 0.3


class ConflictsPane(Pane):
    """Filters (search, routed teacher, class, margin ceiling) over a paged table."""

    TITLE = "Conflicts"
    DEFAULT_CSS = """
    ConflictsPane #conflict-filters { height: 1; }
    ConflictsPane #conflict-search { width: 1fr; }
    ConflictsPane #conflict-teacher, ConflictsPane #conflict-class { width: 18; margin-left: 1; }
    ConflictsPane #conflict-margin { width: 12; margin-left: 1; }
    ConflictsPane #conflict-status { height: 1; color: $text-muted; }
    ConflictsPane #conflicts-table { height: 1fr; overflow-x: hidden; }
    """
    BINDINGS = [
        Binding("enter", "detail", "Details", show=False),
        Binding("slash", "search", "Search"),
        Binding("x", "export_csv", "Export CSV"),
        Binding("escape", "focus_list", "List", show=False),
    ]

    def __init__(self, root: Path, **kwargs):
        super().__init__(root, **kwargs)
        self.integration: IntegrationRecord | None = None
        self.filters = InstanceFilter()
        self.request = 0
        self.loaded: list[Instance] = []
        self.exhausted = True
        self.loading = False
        self.total: int | None = None
        self._search_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="conflict-filters"):
            yield Input(placeholder="/ search the texts", id="conflict-search", compact=True)
            yield Select([], prompt="any teacher", id="conflict-teacher", compact=True)
            yield Select([], prompt="any class", id="conflict-class", compact=True)
            yield Input(placeholder="max margin", id="conflict-margin", compact=True)
        yield Static("No integration yet: in Jobs (3) press i once the scores are done.",
                     id="conflict-status")
        table = Table(id="conflicts-table", cursor_type="row", zebra_stripes=True)
        table.add_column("margin", key="margin")
        table.add_column("won by", key="teacher")
        table.add_column("class", key="class")
        table.add_column("gold", key="gold")
        table.add_column("text", key="text")
        yield table

    def main_widget(self) -> DataTable:
        return self.query_one("#conflicts-table", DataTable)

    @property
    def teachers(self) -> list[str]:
        return self.integration.summary.teacher_names if self.integration is not None else []

    @property
    def labels(self) -> list[str]:
        return list(self.integration.summary.labels) if self.integration is not None else []

    def apply_changes(self, changes: StoreChanges) -> None:
        if changes.integration is None:
            return
        self.integration = changes.integration
        threshold = self.integration.summary.conflict_threshold
        with self.prevent(Select.Changed, Input.Changed):
            self.query_one("#conflict-teacher", Select).set_options(
                (name, index) for index, name in enumerate(self.teachers))
            self.query_one("#conflict-class", Select).set_options(
                (name, index) for index, name in enumerate(self.labels))
            self.query_one("#conflict-margin", Input).value = f"{threshold:g}"
        self.filters = InstanceFilter(max_margin=threshold, search=self.filters.search)
        self.reload()

    # -- loading -------------------------------------------------------------------------
    def reload(self) -> None:
        """Start over with the current filters: the first page, and the count beside it."""
        if self.integration is None:
            return
        self.request += 1
        self.loaded, self.exhausted, self.total = [], False, None
        self.main_widget().clear()
        self._status()
        self._fetch(after=None)
        request, key, filters, root = self.request, self.integration.key, self.filters, self.root

        def count_rows() -> ConflictsCounted:
            with open_store(root) as store:
                return ConflictsCounted(request, conflict_count(store, key, filters) if store else 0)

        run_in_thread(self, count_rows, action="counting conflicts", group="conflicts-count",
                      exclusive=True)

    def _fetch(self, after: tuple[float, int] | None) -> None:
        self.loading = True
        request, key, filters, root = self.request, self.integration.key, self.filters, self.root

        def read_page() -> ConflictsPage:
            with open_store(root) as store:
                rows = conflict_page(store, key, filters, after, PAGE + 1) if store else []
            return ConflictsPage(request, rows[:PAGE], after is not None, len(rows) <= PAGE)

        run_in_thread(self, read_page, action="reading conflicts", group="conflicts-page",
                      exclusive=True)

    def on_conflicts_page(self, message: ConflictsPage) -> None:
        if message.request != self.request:
            return  # the filters changed while this page was read
        self.loading, self.exhausted = False, message.exhausted
        table = self.main_widget()
        teachers, labels = self.teachers, self.labels
        for item in message.instances:
            table.add_row(*row_cells(item, teachers, labels), key=str(item.row))
        self.loaded.extend(message.instances)
        self._status()

    def on_action_failed(self, message: ActionFailed) -> None:
        self.loading = False  # a failed read may be tried again; the screen tells the user

    def on_conflicts_counted(self, message: ConflictsCounted) -> None:
        if message.request == self.request:
            self.total = message.total
            self._status()

    def _status(self, problem: str | None = None) -> None:
        status = self.query_one("#conflict-status", Static)
        if problem:
            status.update(Text(problem, "red"))
            return
        total = "counting…" if self.total is None else f"{self.total:,}"
        margin = self.filters.max_margin
        scope = f"under margin {margin:g}" if margin is not None else "in all"
        method = self.integration.settings.method if self.integration is not None else ""
        status.update(Text(f"{total} texts {scope} · lowest first · {len(self.loaded):,} shown · "
                           f"{method}"))

    @on(DataTable.RowHighlighted, "#conflicts-table")
    def _maybe_next_page(self, event: DataTable.RowHighlighted) -> None:
        if self.exhausted or self.loading or not self.loaded:
            return
        if event.cursor_row >= len(self.loaded) - FETCH_WHEN_LEFT:
            last = self.loaded[-1]
            self._fetch(after=(last.margin, last.row))

    # -- filters -------------------------------------------------------------------------
    @on(Input.Changed)
    def _filter_typed(self) -> None:
        if self._search_timer is not None:
            self._search_timer.stop()
        self._search_timer = self.set_timer(SEARCH_DELAY_S, self._apply_filters)

    @on(Input.Submitted)
    @on(Select.Changed)
    def _apply_filters(self) -> None:
        margin_text = self.query_one("#conflict-margin", Input).value.strip()
        try:
            margin = float(margin_text) if margin_text else None
        except ValueError:
            self._status(f"max margin {margin_text!r} is not a number: type one in [0, 1], or "
                         "nothing to list every text")
            return
        teacher = self.query_one("#conflict-teacher", Select).value
        label = self.query_one("#conflict-class", Select).value
        filters = InstanceFilter(
            max_margin=margin, routed=teacher if isinstance(teacher, int) else None,
            target=label if isinstance(label, int) else None,
            search=self.query_one("#conflict-search", Input).value.strip() or None)
        if filters != self.filters or self.total is None:
            self.filters = filters
            self.reload()

    def action_search(self) -> None:
        self.query_one("#conflict-search", Input).focus()

    def action_focus_list(self) -> None:
        self.main_widget().focus()

    # -- detail and export ---------------------------------------------------------------
    @on(DataTable.RowSelected, "#conflicts-table")
    def action_detail(self) -> None:
        table = self.main_widget()
        if self.integration is None or table.cursor_row >= len(self.loaded):
            return
        instance, integration, root = self.loaded[table.cursor_row], self.integration, self.root

        def read_scores() -> ConflictScores:
            with open_store(root) as store:
                views = teacher_views(root, store, integration, instance.row) if store else []
            return ConflictScores(instance, views)

        run_in_thread(self, read_scores, action="reading the teachers' scores", group="detail",
                      exclusive=True)

    def on_conflict_scores(self, message: ConflictScores) -> None:
        self.app.push_screen(ConflictDetailScreen(message.instance, message.views, self.teachers,
                                                  self.labels))

    def action_export_csv(self) -> None:
        if self.integration is None:
            self.notify("nothing to export yet: integrate first (Jobs, i)", severity="warning")
            return
        integration, filters, root = self.integration, self.filters, self.root
        path = ProjectPaths(root).exports / f"conflicts-{integration.key[:8]}.csv"
        self.notify(f"writing {path.name}…", timeout=2)
        run_in_thread(self, lambda: ConflictsExported(
            str(path), export_conflicts(root, integration, filters, path, should_stop=cancelled),
            filters),
            action="exporting conflicts", group="conflicts-export", exclusive=True)

    def on_conflicts_exported(self, message: ConflictsExported) -> None:
        self.notify(f"wrote {message.rows:,} texts to {message.path}", title="Conflicts exported")


def row_cells(item: Instance, teachers: list[str], labels: list[str]) -> tuple:
    text = item.text.replace("\n", " ")
    gold = "" if item.gold is None else (labels[item.gold] if item.gold < len(labels) else "?")
    return (f"{item.margin:.3f}", _name(teachers, item.routed), _name(labels, item.target), gold,
            text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…")


def _name(names: list[str], index: int) -> str:
    return names[index] if 0 <= index < len(names) else str(index)
