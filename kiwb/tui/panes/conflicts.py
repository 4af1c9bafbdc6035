"""Conflicts: texts whose two most confident teachers are close, and labeling them.

The list is paged from the store by keyset, a page at a time as the cursor nears the end, so
a million scored texts never load at once; counting runs beside it. In labeling mode (l) the
number keys give the selected text a label and move on; each decision is committed as it is
made (kiwb.tui.label_writer), and r / t feed the labels back into an integration and a run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import DataTable, Input, Select, Static

from kiwb.kinds import TeacherKind, kind_named
from kiwb.project.instances import Instance, InstanceFilter, key_of
from kiwb.project.labels import NONE
from kiwb.project.paths import ProjectPaths
from kiwb.project.queries import (
    LabelProgress,
    StoreChanges,
    conflict_count,
    conflict_page,
    label_progress,
    open_store,
    teacher_views,
)
from kiwb.project.records import IntegrationRecord
from kiwb.project.teacher_kinds import LoadedProject
from kiwb.tui import launcher
from kiwb.tui.background import cancelled, run_in_thread
from kiwb.tui.conflicts_csv import export_conflicts
from kiwb.tui.label_writer import LabelWriter
from kiwb.tui.labeling import (
    NEXT_ORDER,
    NEXT_SCOPE,
    ORDER_NAMES,
    SCOPE_NAMES,
    Decision,
    decision_for_key,
    header,
    integrate_with_labels,
    is_label_key,
    label_cell,
    legend,
    no_label_on,
    train_with_labels,
)
from kiwb.tui.messages import (
    ActionDone,
    ActionFailed,
    ConflictScores,
    ConflictsCounted,
    ConflictsExported,
    ConflictsPage,
    LabelFailed,
    LabelSaved,
    LabelsRead,
    LabelUndone,
)
from kiwb.tui.panes.base import Pane
from kiwb.tui.screens.detail import ConflictDetailScreen
from kiwb.tui.screens.label_picker import LabelPicker
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
    ConflictsPane #label-header { height: 1; }
    ConflictsPane #label-legend { height: auto; max-height: 2; display: none; background: $boost; }
    ConflictsPane.labeling #label-legend { display: block; }
    ConflictsPane #conflicts-table { height: 1fr; overflow-x: hidden; }
    """
    BINDINGS = [
        Binding("enter", "detail", "Details", show=False),
        Binding("slash", "search", "Search"),
        Binding("l", "labeling", "Label"),
        Binding("u", "undo", "Undo label", show=False),
        Binding("p", "pick", "Every label", show=False),
        Binding("o", "order", "Order", show=False),  # in the help: the footer fits 80 columns
        Binding("f", "scope", "Filter"),
        Binding("r", "reintegrate", "Re-integrate"),
        Binding("t", "train", "Train"),
        Binding("x", "export_csv", "Export CSV"),
        Binding("escape", "escape", "List", show=False),
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
        self.labeling = False
        self.writer = LabelWriter(root, self)
        self.progress: LabelProgress | None = None
        # What each text showed before a decision not yet stored, oldest first: a decision
        # the store refused puts its text back as it was.
        self._unsaved: dict[str, list[tuple[bool, str | None]]] = {}
        self._detail_after_undo = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="conflict-filters"):
            yield Input(placeholder="/ search the texts", id="conflict-search", compact=True)
            yield Select([], prompt="any teacher", id="conflict-teacher", compact=True)
            yield Select([], prompt="any class", id="conflict-class", compact=True)
            yield Input(placeholder="max margin", id="conflict-margin", compact=True)
        yield Static("No integration yet: in Jobs (3) press i once the scores are done.",
                     id="conflict-status")
        yield Static(header(None), id="label-header")
        yield Static("", id="label-legend")
        table = Table(id="conflicts-table", cursor_type="row", zebra_stripes=True)
        table.add_column("margin", key="margin")
        table.add_column("won by", key="teacher")
        table.add_column("class", key="class")
        table.add_column("gold", key="gold")
        table.add_column("label", key="label")
        table.add_column("text", key="text")
        yield table

    def on_unmount(self) -> None:
        self.writer.stop()  # what was decided is written before the workbench closes

    def main_widget(self) -> DataTable:
        return self.query_one("#conflicts-table", DataTable)

    @property
    def teachers(self) -> list[str]:
        return self.integration.summary.teachers if self.integration is not None else []

    @property
    def labels(self) -> list[str]:
        return list(self.integration.summary.labels) if self.integration is not None else []

    def labels_for(self, item: Instance | None) -> list[str]:
        """The labels `item` may be given: all, or (multi-task) those of its task."""
        return self.kind.jobs.conflict_labels(item.details if item is not None else None,
                                              self.labels)

    @property
    def kind(self) -> TeacherKind:
        """The kind of the teachers integrated: how a conflict with details reads."""
        return kind_named(self.integration.summary.teachers_kind if self.integration else None)

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
        self.filters = replace(self.filters, max_margin=threshold, routed=None, target=None)
        self.query_one("#label-legend", Static).update(legend(self.labels))
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
        self.read_label_progress()
        request, key, filters, root = self.request, self.integration.key, self.filters, self.root

        def count_rows() -> ConflictsCounted:
            with open_store(root) as store:
                return ConflictsCounted(request, conflict_count(store, key, filters) if store else 0)

        run_in_thread(self, count_rows, action="counting conflicts", group="conflicts-count",
                      exclusive=True)

    def read_label_progress(self) -> None:
        integration, root = self.integration, self.root

        def read() -> LabelsRead | None:
            with open_store(root) as store:
                return LabelsRead(integration.key, label_progress(store, integration)) if store else None

        run_in_thread(self, read, action="reading the labels", group="label-progress",
                      exclusive=True)

    def on_labels_read(self, message: LabelsRead) -> None:
        if self.integration is not None and message.integration == self.integration.key:
            self.progress = message.progress
            self.query_one("#label-header", Static).update(
                header(message.progress))

    def _fetch(self, after: tuple | None) -> None:
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
        teachers, labels, kind = self.teachers, self.labels, self.kind
        for item in message.instances:
            table.add_row(*row_cells(item, teachers, labels, kind), key=str(item.row))
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
        labels = SCOPE_NAMES[self.filters.labels]
        routing = routing_shown(self.integration)
        noun = "pairs" if self.kind.words.unit == "pair" else "texts"
        status.update(Text(f"{total} {noun} {scope} · {ORDER_NAMES[self.filters.order]} · {labels} · "
                           f"{len(self.loaded):,} shown · {routing}"))

    @on(DataTable.RowHighlighted, "#conflicts-table")
    def _task_legend(self, event: DataTable.RowHighlighted) -> None:
        """The legend follows the selected conflict's labels (a multi-task conflict's task)."""
        labels = self.labels_for(self._cursor_item())
        if labels != self.labels:
            self.query_one("#label-legend", Static).update(legend(labels))

    @on(DataTable.RowHighlighted, "#conflicts-table")
    def _maybe_next_page(self, event: DataTable.RowHighlighted) -> None:
        if self.exhausted or self.loading or not self.loaded:
            return
        if event.cursor_row >= len(self.loaded) - FETCH_WHEN_LEFT:
            self._fetch(after=key_of(self.loaded[-1], self.filters))

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
        filters = replace(
            self.filters, max_margin=margin, routed=teacher if isinstance(teacher, int) else None,
            target=label if isinstance(label, int) else None,
            search=self.query_one("#conflict-search", Input).value.strip() or None)
        self._refilter(filters)

    def _refilter(self, filters: InstanceFilter) -> None:
        if filters != self.filters or self.total is None:
            self.filters = filters
            self.reload()

    def action_order(self) -> None:
        """Lowest margin first, most useful next (unlabeled texts, spread over teachers and
        classes), or a random sample of the unlabeled texts: the last two list unlabeled
        texts, so the scope is the unlabeled texts while they last."""
        order = NEXT_ORDER[self.filters.order]
        self._refilter(replace(self.filters, order=order,
                               labels="unlabeled" if order != "margin" else self.filters.labels))

    def action_scope(self) -> None:
        """Every text, the unlabeled ones, or the labeled ones (in margin order)."""
        self._refilter(replace(self.filters, labels=NEXT_SCOPE[self.filters.labels],
                               order="margin"))

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
            if instance.details is not None:  # a cluster carries its teachers' tags itself
                return ConflictScores(instance, [])
            with open_store(root) as store:
                views = teacher_views(root, store, integration, instance.row) if store else []
            return ConflictScores(instance, views)

        run_in_thread(self, read_scores, action="reading the teachers' scores", group="detail",
                      exclusive=True)

    def on_conflict_scores(self, message: ConflictScores) -> None:
        shown = message.instance

        def decided(decision: Decision | None) -> None:
            if decision is None:
                return
            if decision.kind == "undo":
                self._detail_after_undo = True  # the text taken back is shown next
                self.action_undo()
                return
            self.decide(decision, shown)  # the text shown, wherever the cursor is now
            following = self._cursor_item()
            if following is not None and following.text_hash != shown.text_hash:
                self.action_detail()  # on to the next text, in the detail view too

        self.app.push_screen(ConflictDetailScreen(message.instance, message.views, self.teachers,
                                                  self.labels_for(shown), self.kind), decided)

    # -- labeling ------------------------------------------------------------------------
    def action_labeling(self) -> None:
        """Labeling mode on or off: the number keys label the selected text while it is on,
        and only in this pane, with the legend of what each key gives showing."""
        if self.integration is None:
            self.notify("nothing to label yet: integrate first (Jobs, i)", severity="warning")
            return
        if self.labeling:
            self.leave_labeling()
            return
        self.labeling = True
        self.set_class(True, "labeling")
        self.main_widget().focus()
        self.notify("label mode: the number keys label the selected text (the legend above "
                    "the list); Esc leaves it", title="Label mode", timeout=4)

    def leave_labeling(self, why: str = "") -> None:
        """Label mode off, said in a notice (`why`: what ended it), so a number key pressed
        after it switches panes instead of labeling."""
        if not self.labeling:
            return
        self.labeling = False
        self.set_class(False, "labeling")
        self.notify("label mode off" + (f": {why}" if why else "")
                    + "; the number keys switch panes again", timeout=3)

    def hidden(self) -> None:
        self.leave_labeling("another pane was shown")

    def action_escape(self) -> None:
        """Esc leaves label mode, else goes back to the list."""
        if self.labeling:
            self.leave_labeling()
        self.action_focus_list()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in ("undo", "pick"):
            return self.labeling  # otherwise the key is free for the rest of the workbench
        return True

    def on_key(self, event: events.Key) -> None:
        if not self.labeling or not self.main_widget().has_focus:
            return
        key = event.character or ""
        labels = self.labels_for(self._cursor_item())
        decision = decision_for_key(key, labels)
        if decision is None and not is_label_key(key):
            return
        event.stop()  # before the screen reads a digit as "switch pane"
        event.prevent_default()
        if decision is None:
            self.notify(no_label_on(key, labels), severity="warning", timeout=3)
        else:
            self.decide(decision)

    def decide(self, decision: Decision, item: Instance | None = None) -> None:
        """Apply a decision to `item` (default: the selected text): stored at once, then on
        to the next unlabeled text. A picker or detail view passes the text it showed, so a
        list read again meanwhile cannot move the label to another text."""
        if decision.kind == "undo":
            self.action_undo()
            return
        item = item or self._cursor_item()
        if item is None:
            return
        number = self._loaded_index(item)
        if decision.kind != "skip":
            self.writer.give(item.text, decision.label)
            self.notify(label_notice(item.text, decision.label), timeout=3)
            self._unsaved.setdefault(item.text_hash, []).append((item.labeled, item.given))
            if number is not None:
                self._show_label(number, replace(item, labeled=True, given=decision.label))
        if number is None:
            return  # the list was read again: the label is kept, the cursor stays
        following = next((later for later in range(number + 1, len(self.loaded))
                          if not self.loaded[later].labeled), None)
        if following is not None:
            self.main_widget().move_cursor(row=following)

    def _loaded_index(self, item: Instance) -> int | None:
        cursor = self.main_widget().cursor_row
        if 0 <= cursor < len(self.loaded) and self.loaded[cursor].text_hash == item.text_hash:
            return cursor
        return next((number for number, shown in enumerate(self.loaded)
                     if shown.text_hash == item.text_hash), None)

    def action_pick(self) -> None:
        item = self._cursor_item()
        if item is not None:
            self.app.push_screen(LabelPicker(self.labels_for(item), item.text),
                                 lambda decision: decision and self.decide(decision, item))

    def action_undo(self) -> None:
        self.writer.undo()

    def on_label_saved(self, message: LabelSaved) -> None:
        self._settled(message.text_hash)
        self.read_label_progress()

    def on_label_failed(self, message: LabelFailed) -> None:
        before = self._settled(message.text_hash)
        if before is not None:
            for number, item in enumerate(self.loaded):
                if item.text_hash == message.text_hash:
                    self._show_label(number, replace(item, labeled=before[0], given=before[1]))

    def _settled(self, key: str) -> tuple[bool, str | None] | None:
        """The oldest unsaved decision on the text `key` is stored or refused: what the text
        showed before it."""
        waiting = self._unsaved.get(key)
        if not waiting:
            return None
        before = waiting.pop(0)
        if not waiting:
            del self._unsaved[key]
        return before

    def on_label_undone(self, message: LabelUndone) -> None:
        found = False
        for number, item in enumerate(self.loaded):
            if item.text_hash == message.text_hash:
                self._show_label(number, replace(item, labeled=message.labeled,
                                                 given=message.label))
                self.main_widget().move_cursor(row=number)
                found = True
        self.notify("label taken back", timeout=2)
        self.read_label_progress()
        if self._detail_after_undo:
            self._detail_after_undo = False
            if found:
                self.action_detail()

    def _show_label(self, number: int, item: Instance) -> None:
        self.loaded[number] = item
        self.main_widget().update_cell(str(item.row), "label", label_cell(item))

    def _cursor_item(self) -> Instance | None:
        row = self.main_widget().cursor_row
        return self.loaded[row] if self.integration is not None and 0 <= row < len(self.loaded) else None

    # -- feeding the labels back ---------------------------------------------------------
    def action_reintegrate(self) -> None:
        """Integrate again with the labels: stacked routing fitted on them, labeled texts as
        one-hot targets, texts marked none left out."""
        self.leave_labeling("the labels go to an integration")
        config = self._config_with_labels()
        if config is not None:
            spec, root = integrate_with_labels(LoadedProject.of(config)), self.root
            run_in_thread(self, lambda: ActionDone(
                f"started job {launcher.launch(root, spec)}: integrating with the labels; the "
                "header shows what they changed when it is done"),
                action="starting the integration")

    def action_train(self) -> None:
        """A student run from the labels (the settings of r), beside the runs before."""
        self.leave_labeling("the labels go to a student")
        config = self._config_with_labels()
        if config is not None:
            root = self.root
            spec = train_with_labels(LoadedProject.of(config),
                                     lambda run: ProjectPaths(root).run_dir(run).exists())
            run_in_thread(self, lambda: ActionDone(
                f"started job {launcher.launch(root, spec)}: training {spec.run}; see Accuracy (5)"),
                action="starting the training")

    def _config_with_labels(self):
        if self.progress is None or not self.progress.in_store:
            self.notify("no labels yet: press l and label some texts first", severity="warning")
            return None
        if not self.progress.judged:
            self.notify("no text of this list has a class label yet (texts marked none do not "
                        "teach the routing): give some texts a label first", severity="warning")
            return None
        return self.require_config()

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


def row_cells(item: Instance, teachers: list[str], labels: list[str],
              kind: TeacherKind | None = None) -> tuple:
    """A conflicts list row (`kind`: the teachers', None: the default kind's)."""
    text = item.text.replace("\n", " ")
    # what the kind adds: a cluster's tags, a label's owners
    if item.details is not None and kind is not None:
        text = kind.words.conflict_row(text, item.details, teachers)
    gold = "" if item.gold is None else (labels[item.gold] if item.gold < len(labels) else "?")
    return (f"{item.margin:.3f}", won_by(item, teachers), _name(labels, item.target), gold,
            label_cell(item), text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…")


def won_by(item: Instance, teachers: list[str]) -> str:
    """The teacher a text went to and, among three or more, the runner-up its margin is
    measured against ("t1 over t3"): with two teachers the runner-up is the other one."""
    name = _name(teachers, item.routed)
    if len(teachers) <= 2 or len(item.confidences) != len(teachers):
        return name
    runner_up = max((index for index in range(len(teachers)) if index != item.routed),
                    key=lambda index: item.confidences[index])
    return f"{name} over {_name(teachers, runner_up)}"


def _name(names: list[str], index: int) -> str:
    return names[index] if 0 <= index < len(names) else str(index)


def routing_shown(integration) -> str:
    """The routing an integration used, as the status line names it: the one "auto" chose,
    or the settings' own."""
    if integration is None:
        return ""
    summary = integration.summary
    if summary.routing_choice is not None:
        return f"{summary.routing_choice.chosen} (auto)"
    return summary.routing.name if summary.routing is not None else integration.settings.routing


def label_notice(text: str, label: str | None) -> str:
    """What a label key did, with how to take it back."""
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    return f"“{shown}” → {label if label is not None else NONE} · u undo · Esc leaves label mode"
