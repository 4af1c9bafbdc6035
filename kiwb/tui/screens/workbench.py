"""The main screen: seven panes in tabs, fed by the store feed and the project's files."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, TabbedContent, TabPane

from kiwb.project.config import ProjectConfig
from kiwb.project.environment import environment_problems
from kiwb.tui.background import cancelled, run_in_thread
from kiwb.tui.feed import StoreFeed
from kiwb.tui.inspect import inspect_dataset, inspect_teacher, refuse_mixed_kinds
from kiwb.tui.messages import (
    ActionDone,
    ActionFailed,
    ConfigLoaded,
    DatasetsInspected,
    StoreChanged,
    TeachersInspected,
)
from kiwb.tui.panes.accuracy import AccuracyPane
from kiwb.tui.panes.base import Pane
from kiwb.tui.panes.conflicts import ConflictsPane
from kiwb.tui.panes.data import DataPane
from kiwb.tui.panes.export import ExportPane
from kiwb.tui.panes.jobs import JobsPane
from kiwb.tui.panes.teachers import TeachersPane
from kiwb.tui.panes.uncertainty import UncertaintyPane

PANES: tuple[type[Pane], ...] = (TeachersPane, DataPane, JobsPane, UncertaintyPane, AccuracyPane,
                                 ConflictsPane, ExportPane)


def pane_id(pane: type[Pane]) -> str:
    return pane.TITLE.lower()


class WorkbenchScreen(Screen):
    """Composes the panes and routes the feed's messages to them; holds no pane logic."""

    DEFAULT_CSS = """
    WorkbenchScreen TabPane { padding: 0; }
    """

    BINDINGS = [
        *(Binding(str(number), f"show_pane('{pane_id(pane)}')", pane.TITLE, show=False)
          for number, pane in enumerate(PANES, start=1)),
        Binding("question_mark", "app.help", "Keys", key_display="?"),
    ]

    def __init__(self, root: Path, initial: str | None = None):
        super().__init__()
        self.root = root
        self.initial = initial or pane_id(PANES[0])
        self.config: ProjectConfig | None = None
        self.feed = StoreFeed(self, root)
        self._inspected_data: tuple = ()
        self._last_failure: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial=self.initial):
            for number, pane in enumerate(PANES, start=1):
                with TabPane(f"{number} {pane.TITLE}", id=pane_id(pane)):
                    yield pane(self.root, id=f"{pane_id(pane)}-pane")
        # Compact, and without the palette's hint (ctrl+p is in the help and the header's
        # icon): the busiest pane's keys then fit in 80 columns
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.sub_title = str(self.root.name)
        self.feed.start()
        self.call_after_refresh(self._shown, self.initial)

    def panes(self) -> list[Pane]:
        return list(self.query(Pane))

    def action_show_pane(self, name: str) -> None:
        self.query_one(TabbedContent).active = name

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._shown(event.pane.id)

    def _shown(self, name: str | None) -> None:
        for pane in self.panes():
            if pane.id == f"{name}-pane":
                pane.shown()
            else:  # a pane left behind drops what only holds while it is seen (label mode)
                pane.hidden()

    def refresh_now(self) -> None:
        self.feed.poll()

    # -- routing the background messages to the panes --------------------------------------
    def on_config_loaded(self, message: ConfigLoaded) -> None:
        if message.config is not None and message.config == self.config:
            return  # the file was rewritten with what we already show
        self.config = message.config
        self.title = message.config.name if message.config else "kiwb"
        problems = environment_problems(message.config) if message.config is not None else []
        for pane in self.panes():
            pane.show_config(message.config, message.error, problems)
        if message.config is not None:
            self._inspect(message.config)

    def _inspect(self, config: ProjectConfig) -> None:
        run_in_thread(self, lambda: TeachersInspected(refuse_mixed_kinds(
            [inspect_teacher(config, teacher) for teacher in config.teachers],
            multi_task=bool(config.tasks))),
            action="reading the teachers", group="inspect-teachers", exclusive=True)
        specs = tuple((role, getattr(config.data, role)) for role in ("unlabeled", "eval"))
        if specs == self._inspected_data:
            return  # data files are the slow part; the same settings need no second read
        self._inspected_data = specs
        run_in_thread(self, lambda: DatasetsInspected(
            [inspect_dataset(config, role, spec, cancelled) for role, spec in specs if spec is not None]),
            action="reading the data", group="inspect-data", exclusive=True)

    def on_teachers_inspected(self, message: TeachersInspected) -> None:
        self.query_one(TeachersPane).show_summaries(message.summaries)

    def on_datasets_inspected(self, message: DatasetsInspected) -> None:
        self.query_one(DataPane).show_summaries(message.summaries)

    def on_store_changed(self, message: StoreChanged) -> None:
        self._last_failure = None
        with self.app.batch_update():
            for pane in self.panes():
                pane.apply_changes(message.changes)

    def on_action_done(self, message: ActionDone) -> None:
        self.notify(message.message)
        if message.refresh:
            self.feed.reread_config()
            self.refresh_now()

    def on_action_failed(self, message: ActionFailed) -> None:
        if message.message == self._last_failure:
            return  # a poll failing every second says it once
        self._last_failure = message.message
        self.notify(message.message, title=f"{message.action.capitalize()} failed",
                    severity="error", timeout=10)
