"""One conflicting text in full: each teacher's distributions, confidences and who won; with a
label key, the decision on it (the Conflicts pane writes it and shows the next text)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kiwb.kinds import TeacherKind, kind_named
from kiwb.project.instances import Instance
from kiwb.project.queries import TeacherView
from kiwb.tui import plots
from kiwb.tui.labeling import (
    Decision,
    decision_for_key,
    is_label_key,
    label_cell,
    legend,
    no_label_on,
)
from kiwb.tui.screens.label_picker import LabelPicker
from kiwb.tui.widgets import Plot, PlotStyles


class ConflictDetailScreen(ModalScreen[Decision | None]):
    """The text, then per teacher: MC-dropout mean and deterministic distribution bars; a label
    key closes it with that decision."""

    DEFAULT_CSS = """
    ConflictDetailScreen { align: center middle; }
    ConflictDetailScreen > VerticalScroll {
        width: 100%; max-width: 110; height: auto; max-height: 100%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    ConflictDetailScreen #detail-text { margin-bottom: 1; }
    """
    BINDINGS = [Binding("escape", "close", "Close"), Binding("q", "close", "Close", show=False),
                Binding("p", "pick", "Every label", show=False)]

    def __init__(self, instance: Instance, views: list[TeacherView], teachers: list[str],
                 labels: list[str], kind: TeacherKind | None = None):
        super().__init__()
        self.instance, self.views, self.teachers, self.labels = instance, views, teachers, labels
        self.kind = kind if kind is not None else kind_named(None)  # None: the default kind

    def compose(self) -> ComposeResult:
        item = self.instance
        with VerticalScroll():
            yield Static(self._heading(), id="detail-heading")
            yield Static(Text(item.text), id="detail-text")
            for _view in self.views:
                yield Plot(classes="teacher")
            if item.details is not None:  # what the kind says of it: each teacher's reading
                yield Static(kind_detail(self.kind, item.details, self.teachers),
                             id="detail-cluster")
            elif not self.views:
                yield Static("The teachers' score files for this text were not found (rescored or "
                             "deleted since the integration); integrate again.", classes="problem")
            if item.details is None:
                yield Static("MC mean (bar, left) and deterministic (right) probabilities; esc "
                             "closes.", classes="note")
            yield Static(legend(self.labels, escape="close"), classes="note", id="detail-legend")

    def on_mount(self) -> None:
        won = self.teachers[self.instance.routed] if self.instance.routed < len(self.teachers) else None
        for plot, view in zip(self.query(Plot), self.views, strict=True):
            mark = " · won" if view.teacher == won else ""
            mi = "" if view.mutual_information is None else f" · MI {view.mutual_information:.3f}"
            title = (f"{view.teacher}{mark} · confidence MC {view.mc_confidence:.3f}, "
                     f"plain {view.det_confidence:.3f}{mi}")
            plot.show(title, _distribution(view), len(view.labels))

    def _heading(self) -> Group:
        item = self.instance
        confidences = ", ".join(f"{name} {value:.3f}" for name, value in
                                zip(self.teachers, item.confidences, strict=False))
        gold = "" if item.gold is None else f" · gold {self._label(item.gold)}"
        gold += f" · labeled {label_cell(item)}" if item.labeled else ""
        return Group(
            Text(f"{'cluster' if item.details is not None else 'text'} {item.row} · margin "
                 f"{item.margin:.3f} · won by "
                 f"{self._teacher(item.routed)} · class {self._label(item.target)}{gold}", "bold"),
            Text(f"confidences used for routing: {confidences}", "dim"))

    def _teacher(self, index: int) -> str:
        return self.teachers[index] if 0 <= index < len(self.teachers) else str(index)

    def _label(self, index: int) -> str:
        return self.labels[index] if 0 <= index < len(self.labels) else str(index)

    def on_key(self, event: events.Key) -> None:
        key = event.character or ""
        decision = decision_for_key(key, self.labels)
        if decision is not None:
            event.stop()
            self.dismiss(decision)  # u too: the pane takes the last decision back
        elif is_label_key(key):
            event.stop()
            self.notify(no_label_on(key, self.labels), severity="warning", timeout=3)

    def action_pick(self) -> None:
        def picked(decision: Decision | None) -> None:
            if decision is not None:
                self.dismiss(decision)

        self.app.push_screen(LabelPicker(self.labels, self.instance.text), picked)

    def action_close(self) -> None:
        self.dismiss(None)


def kind_detail(kind: TeacherKind, details: dict, teachers: list[str]) -> Text:
    """The kind's lines on a conflict (a cluster's tags per teacher, a label's owners)."""
    text = Text()
    for line, style in kind.words.conflict_detail(details, teachers):
        text.append(line + "\n", style)
    return text


def _distribution(view: TeacherView):
    def draw(width: int, styles: PlotStyles) -> Text:
        return plots.distribution(view.labels, view.mc_probs, view.det_probs, width,
                                  mc_style=styles.bar, det_style=styles.alt)

    return draw
