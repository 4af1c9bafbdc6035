"""Uncertainty: each teacher's confidence, how the routing split it, MC dropout against plain
confidence, and the margins."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from kiwb.project.config_schema import MULTI_LABEL_TASK, SINGLE_LABEL_TASK
from kiwb.project.dropout_rates import dropout_note
from kiwb.project.queries import StoreChanges
from kiwb.project.records import IntegrationSummary, RoutingAccuracy, TeacherFacts
from kiwb.tui import plots
from kiwb.tui.history import ScoreHistograms
from kiwb.tui.panes.base import Pane
from kiwb.tui.widgets import Plot, PlotStyles

TEACHER_ROWS = 5   # histogram rows per teacher, axis included
ROUTING_ROWS = 9   # mirrored histogram rows, axis included
SPLIT_ROWS = 7     # rows of each teacher's routed-here / elsewhere histogram, axis included
MARGIN_ROWS = 6


class UncertaintyPane(Pane):
    """Live confidence histograms while scoring; the routing figures and margins after integrating."""

    TITLE = "Uncertainty"
    DEFAULT_CSS = """
    UncertaintyPane #routing-check { height: auto; padding: 0 1; color: $warning; }
    """

    def __init__(self, root: Path, **kwargs):
        super().__init__(root, **kwargs)
        self.histograms = ScoreHistograms("unlabeled")
        self.summary: IntegrationSummary | None = None
        self.use_mc = True  # the shown integration's setting: whether its routing read MC passes
        # teacher -> what its newest score set of the unlabeled texts recorded of its MC
        # dropout (dropout_rates.score_set_dropout), where scoring checked it
        self.dropout: dict[str, dict] = {}

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="uncertainty-scroll"):
            yield Static("", id="routing-check")
            yield Plot(id="teacher-confidence")
            yield Plot(id="label-confidence")
            yield Plot(id="task-uncertainty")
            yield Plot(id="routing-split")
            yield Plot(id="routing")
            yield Plot(id="margins")

    def on_mount(self) -> None:
        self.redraw()

    def main_widget(self) -> VerticalScroll:
        return self.query_one("#uncertainty-scroll", VerticalScroll)

    def show_config(self, config, error, problems=()) -> None:
        super().show_config(config, error, problems)
        self.redraw()

    def apply_changes(self, changes: StoreChanges) -> None:
        changed = any([self.histograms.add(event) for event in changes.events])
        if changes.integration is not None:
            self.summary, changed = changes.integration.summary, True
            choice = self.summary.routing_choice  # routing = "auto": the signal it chose
            self.use_mc = (choice.use_mc if choice is not None
                           else changes.integration.settings.use_mc)
        # the shown integration's record of the sets it read; before one, the newest set's
        dropout = {each.teacher: each.dropout for each in changes.score_sets  # oldest first
                   if each.dataset == "unlabeled" and each.dropout}
        dropout.update((self.summary.teacher_dropout or {}) if self.summary is not None else {})
        if dropout != self.dropout:
            self.dropout, changed = dropout, True
        if changed:
            self.redraw()

    def redraw(self) -> None:
        with self.app.batch_update():
            self._show_routing_check()
            self._draw_teachers()
            self._draw_labels()
            tasks = self._draw_tasks()
            # a multi-task integration routes per task: its tasks' plot says how each did
            routes = self.teachers_kind(self.summary).jobs.routes and not tasks
            for name in ("#routing-split", "#routing"):
                self.query_one(name, Plot).display = routes
            if routes:
                self._draw_split()
                self._draw_routing()
            self._draw_margins()

    def _show_routing_check(self) -> None:
        """The routing check's warning above the plots, when the integration shown is flagged."""
        warning = self.query_one("#routing-check", Static)
        check = self.summary.check if self.summary is not None else None
        line = check.line() if check is not None else ""
        warning.update(Text(line))  # Text: "[integration]" is no markup
        warning.display = bool(line)

    def _draw_teachers(self) -> None:
        plot = self.query_one("#teacher-confidence", Plot)
        order = [t.name for t in self.config.teachers] if self.config else None
        teachers = self.histograms.teachers(order)
        kind = self.teachers_kind(self.summary)
        title, (left, right) = kind.words.histogram_title, kind.words.histogram_names
        if not teachers:
            plot.show(title, lambda width, styles: Text(
                "No scores yet: in Jobs (3) press s to score; histograms fill in as shards finish.",
                "dim"), 1)
            return

        def draw(width: int, styles: PlotStyles) -> Text:
            half = max((width - 2) // 2, 10)
            text = Text()
            for number, teacher in enumerate(teachers):
                if number:
                    text.append("\n")
                heading = Text(f"{teacher.teacher} · ", "bold")
                heading.append_text(mc_heading(left, self.dropout.get(teacher.teacher)))
                heading.append(f" · {teacher.texts:,} texts", "bold")
                text.append_text(plots.side_by_side(
                    [heading, Text(f"{teacher.teacher} · {right}", "bold")], [half, half]))
                text.append("\n")
                text.append_text(plots.side_by_side(
                    [plots.histogram(teacher.mc, half, TEACHER_ROWS, style=styles.bar),
                     plots.histogram(teacher.det, half, TEACHER_ROWS, style=styles.alt)],
                    [half, half]))
            return text

        plot.show(title, draw, len(teachers) * (TEACHER_ROWS + 1))

    def _draw_labels(self) -> None:
        """Per teacher and label it owns, its confidence over the pool (an integration of
        teachers that answer per label records them: multi-label); hidden otherwise."""
        plot = self.query_one("#label-confidence", Plot)
        details = (self.summary.details if self.summary is not None else None) or {}
        found = {facts.name: facts.own["label_histograms"]
                 for facts in (self.summary.per_teacher if self.summary is not None else ())
                 if "label_histograms" in (facts.own or {})}
        plot.display = bool(found)
        if not found:
            return
        rows = sum(len(labels) + 1 for labels in found.values())

        def draw(width: int, styles: PlotStyles) -> Text:
            name_width = min(max(len(label) for labels in found.values() for label in labels),
                             max(width // 3, 4))
            text = Text()
            for number, (teacher, labels) in enumerate(found.items()):
                if number:
                    text.append("\n")
                text.append(f"{teacher} · confidence per label (0 left, 1 right)", "bold")
                for label, counts in labels.items():
                    text.append("\n" + label[:name_width].ljust(name_width) + " ")
                    text.append_text(plots.sparkline(counts, max(width - name_width - 1, 4),
                                                     style=styles.bar))
            return text

        plot.show(f"Each teacher's {details.get('confidence', 'MC dropout')} confidence on each "
                  "of its labels, over the unlabeled texts", draw, rows)

    def _draw_tasks(self) -> bool:
        """A multi-task integration, task by task: a task several teachers answer, each
        teacher's confidence on the texts routed to it and elsewhere (single-label) or on each
        label it owns (multi-label); a task one teacher answers takes its answers. False (and
        hidden) for other kinds."""
        plot = self.query_one("#task-uncertainty", Plot)
        details = self.summary.details if self.summary is not None else None
        tasks = (details or {}).get("tasks")
        plot.display = bool(tasks)
        if not tasks:
            return False
        rows = sum(task_rows(task) for task in tasks.values())

        def draw(width: int, styles: PlotStyles) -> Text:
            text = Text()
            for number, (name, task) in enumerate(tasks.items()):
                if number:
                    text.append("\n")
                text.append_text(task_block(name, task, width, styles))
            return text

        plot.show("Each task's teachers: confidence where the routing sent texts to them (▄) and "
                  "elsewhere (▀), or per label (0 left, 1 right)", draw, rows)
        return True

    def _draw_split(self) -> None:
        plot = self.query_one("#routing-split", Plot)
        summary = self.summary
        routing = summary.routing if summary is not None else None
        name = routing.name if routing is not None else None
        kind = "" if routing is None else "MC " if self.use_mc else "plain "
        # a representation routing compares its own score, not the confidence
        score = routing.score if routing is not None and routing.score else f"{kind}confidence"
        choice = summary.routing_choice if summary is not None else None
        if name and choice is not None:
            name = f"{choice.chosen} (auto)"
        # one line at 80 columns; the legend under the plots says what ▄ and ▀ are
        title = f"Routing{f' · {name}' if name else ''}: each teacher's {score}, to it vs elsewhere"
        teachers = [facts for facts in summary.per_teacher
                    if facts.routing is not None] if routing is not None else []
        if not teachers:
            note = ("This integration has no routing details: integrate again (Jobs, i) to see "
                    "them." if summary else "After integrating (Jobs, i): which texts the routing "
                    "gave each teacher, by its confidence.")
            plot.show(title, lambda width, styles: Text(note, "dim"), 1)
            return
        num_texts = summary.num_texts

        def draw(width: int, styles: PlotStyles) -> Text:
            gap = 2
            column = max((width - gap * (len(teachers) - 1)) // len(teachers), 10)
            blocks = []
            for facts in teachers:
                entry = facts.routing
                block = Text(facts.name, "bold")
                block.append("\n")
                block.append_text(plots.mirrored_histogram(
                    entry.histogram_here, entry.histogram_elsewhere, column, SPLIT_ROWS,
                    upper_style=styles.bar, lower_style=styles.alt, marker=entry.split,
                    marker_style=styles.marker))
                blocks.append(block)
            text = plots.side_by_side(blocks, [column] * len(blocks), gap=gap)
            text.append("\n")
            text.append("▄ routed to it", styles.bar)
            text.append("  ")
            text.append("▀ routed elsewhere", styles.alt)
            text.append("  ")
            text.append("┊ split", styles.marker)
            text.append(" (best threshold between them)")
            for facts in teachers:
                line = Text(split_line(facts, num_texts))
                line.truncate(width, overflow="ellipsis")
                text.append("\n")
                text.append_text(line)
            if choice is not None:  # why this routing: the table is in kiwb integrate's output
                line = Text(f"auto: {choice.short()}", "dim")
                line.truncate(width, overflow="ellipsis")
                text.append("\n")
                text.append_text(line)
            return text

        plot.show(title, draw, 1 + SPLIT_ROWS + 1 + len(teachers) + (choice is not None))

    def _draw_routing(self) -> None:
        plot = self.query_one("#routing", Plot)
        title = "Right vs wrong teacher on the eval set: MC dropout | plain confidence"
        evaluation = self.summary.eval if self.summary is not None else None
        histograms = evaluation.confidence_histograms if evaluation is not None else None
        if not histograms:
            note = ("No labeled evaluation set: add one in Data (2) to compare MC dropout with plain "
                    "confidence." if self.summary else "After integrating (Jobs, i): how confident the "
                    "teacher that knows the label is, against the others.")
            plot.show(title, lambda width, styles: Text(note, "dim"), 2)
            return
        routing = evaluation.routing_accuracy

        def draw(width: int, styles: PlotStyles) -> Text:
            half = max((width - 2) // 2, 10)
            blocks = [plots.mirrored_histogram(
                histograms[name]["right_teacher"], histograms[name]["wrong_teacher"], half,
                ROUTING_ROWS, upper_style=styles.right, lower_style=styles.wrong)
                for name in ("mc_dropout", "plain_confidence")]
            text = plots.side_by_side(blocks, [half, half])
            text.append("\n")
            text.append("▄ right teacher", styles.right)
            text.append(" (knows the gold label)  ")
            text.append("▀ wrong teacher", styles.wrong)
            if routing:
                text.append(f"\n{accuracy_line(routing, self.summary.routed_by)}")
            for line in notes:
                text.append(f"\n{line}", "yellow")
            return text

        notes = [f"teacher {teacher}'s MC passes: {note}" for teacher, note in (
            (teacher, dropout_note(facts)) for teacher, facts in
            (self.summary.teacher_dropout or {}).items()) if note]
        plot.show(title, draw, ROUTING_ROWS + 1 + (1 if routing is not None else 0) + len(notes))

    def _draw_margins(self) -> None:
        plot = self.query_one("#margins", Plot)
        title = "Margin between the two most confident teachers (conflicts left of the line)"
        summary = self.summary
        if not summary:
            plot.show(title, lambda width, styles: Text(
                "No integration yet: in Jobs (3) press i once the scores are done.", "dim"), 1)
            return
        threshold = summary.conflict_threshold
        share = summary.conflicts / max(summary.num_texts, 1)
        median = summary.margin_quantiles.get("0.5")
        if self.teachers_kind(self.summary).words.unit == "pair":
            plot.show("Conflicting pairs: 1 - the spread of the teachers' cosines (the pairs they "
                      "disagree on most at the left)", lambda width, styles: pair_margins(
                          summary, width, styles), MARGIN_ROWS + 1)
            return

        def draw(width: int, styles: PlotStyles) -> Text:
            text = plots.histogram(summary.margin_histogram, width, MARGIN_ROWS, style=styles.bar,
                                   marker=threshold, marker_style=styles.marker)
            text.append("\n")
            text.append(f"┊ {threshold:g}", styles.marker)
            text.append(f": {summary.conflicts:,} of {summary.num_texts:,} texts "
                        f"({100 * share:.1f}%) are conflicts")
            if median is not None:
                text.append(f" · median margin {median:.3f}")
            return text

        plot.show(title, draw, MARGIN_ROWS + 1)


def pair_margins(summary: IntegrationSummary, width: int, styles: PlotStyles) -> Text:
    """An embedding integration's listed pairs by 1 - their cosine spread, and their count."""
    text = plots.histogram(summary.margin_histogram, width, MARGIN_ROWS, style=styles.bar)
    median = summary.margin_quantiles.get("0.5")
    text.append(f"\n{summary.conflicts:,} pairs listed in Conflicts (6), of the pairs some "
                "teacher finds close"
                + (f" · median spread {1 - median:.3f}" if median is not None else ""))
    return text


def task_rows(task: dict) -> int:
    """The lines `task_block` draws for one task."""
    summary = task.get("summary")
    if summary is None:
        return 2
    if task["kind"] == MULTI_LABEL_TASK:
        histograms = label_histograms(summary)
        return 1 + sum(len(labels) + 1 for labels in histograms.values())
    return 1 + 2 * len(_routed(summary))


def task_block(name: str, task: dict, width: int, styles: PlotStyles) -> Text:
    """One task of a multi-task integration (see UncertaintyPane._draw_tasks)."""
    summary = task.get("summary")
    text = Text(f"{name} · {task['kind']} · ", "bold")
    if summary is None:
        text.append(f"one teacher ({', '.join(task['teachers'])}): its answers are the targets",
                    "dim")
        text.append("\n")
        return text
    text.append(f"{summary['conflicts']:,} conflicts of {summary['num_texts']:,} "
                f"{'texts' if task['kind'] == SINGLE_LABEL_TASK else 'pairs'}")
    column = max(width - 28, 8)
    if task["kind"] == MULTI_LABEL_TASK:
        histograms = label_histograms(summary)
        for teacher, labels in histograms.items():
            text.append(f"\n  {teacher}", "bold")
            for label, counts in labels.items():
                text.append("\n  " + label.split("/", 1)[-1][:24].ljust(25))
                text.append_text(plots.sparkline(counts, column, style=styles.bar))
        return text
    routing = summary.get("routing") or {}
    for facts in _routed(summary):
        entry = facts["routing"]
        text.append(f"\n  {facts['name']} · {routing.get('name')} · won {facts['wins']:,}".ljust(27))
        text.append_text(plots.sparkline(entry["histogram_here"], column, style=styles.bar))
        text.append("\n" + " " * 27)
        text.append_text(plots.sparkline(entry["histogram_elsewhere"], column, style=styles.alt))
    return text


def label_histograms(summary: dict) -> dict[str, dict[str, list[int]]]:
    """teacher -> label -> its confidence histogram on that label, of a multi-task
    integration's multi-label task (its summary as stored); empty where none is recorded."""
    return {facts["name"]: facts["own"]["label_histograms"]
            for facts in summary.get("per_teacher") or ()
            if "label_histograms" in (facts.get("own") or {})}


def _routed(summary: dict) -> list[dict]:
    """A task's stored summary's teachers that its routing estimated something of."""
    if not summary.get("routing"):
        return []
    return [facts for facts in summary.get("per_teacher") or () if facts.get("routing")]


def split_line(facts: TeacherFacts, num_texts: int) -> str:
    """One teacher's routing in a line: texts won, the routing's estimate of the share of texts
    in its labels, the confidence that splits its texts from the others', its calibration."""
    entry = facts.routing
    line = f"{facts.name}: won {facts.wins:,}"
    if num_texts:
        line += f" ({100 * facts.wins / num_texts:.0f}%)"
    if entry.share is not None:
        line += f" · est. in its labels {100 * entry.share:.0f}%"
    line += f" · split {entry.split:.2f}" if entry.split is not None else " · split –"
    if entry.reference is not None:
        line += f" · {entry.reference}"
    if entry.calibration_error is not None:
        line += f" · calibration error {entry.calibration_error:.2f}"
    return line


def mc_heading(name: str, dropout: dict | None) -> Text:
    """The MC histogram's name, saying where its passes were not the teacher's own dropout's
    (a rate kiwb set, or none acting: the histogram is then its plain one)."""
    if dropout and "rate" in dropout and dropout["acts"]:
        return Text(f"{name} {dropout['rate']:g} set by kiwb", "bold yellow")
    if dropout and not dropout["acts"]:  # none acting, whatever rate kiwb set
        return Text(f"{name} none: = plain", "bold yellow")
    return Text(name, "bold")


def accuracy_line(routing: RoutingAccuracy, name: str | None) -> str:
    """How often each way of routing picked a teacher that knows the gold label (`name`: the
    routing used, whose accuracy is `chosen`)."""
    chosen = (f"{name} {_percent(routing.chosen)} · "
              if routing.chosen is not None and name else "")
    return (f"routing accuracy: {chosen}MC dropout {_percent(routing.mc_dropout)} · "
            f"plain confidence {_percent(routing.plain_confidence)}")


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"
