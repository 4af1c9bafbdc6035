"""Accuracy: runs of different methods side by side; one run's curves, classes and confusions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.console import Group
from rich.table import Table as RichTable
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from kiwb.core.learning_check import COLLAPSED, LearningCheck
from kiwb.project.config_schema import SINGLE_LABEL_TASK
from kiwb.project.queries import StoreChanges
from kiwb.project.records import (
    POOL_COLUMNS,
    RECALL_COLUMNS,
    IntegrationSummary,
    RoutingAccuracy,
)
from kiwb.tui import plots
from kiwb.tui.history import RunHistory, Runs
from kiwb.tui.panes.base import Pane
from kiwb.tui.widgets import Plot, PlotStyles, Table, sync_rows

# Row keys of the baselines start with ":", which no run name kiwb makes does.
ENSEMBLE_ROW = ":ensemble"
TEACHER_ROW = ":teacher:"


class AccuracyPane(Pane):
    """A table comparing runs (and the untrained Ensemble), and the selected run in detail."""

    TITLE = "Accuracy"
    BINDINGS = [Binding("w", "funnel", "Where classes go")]
    DEFAULT_CSS = """
    AccuracyPane #runs-table { height: auto; max-height: 8; margin: 0 -1; }
    AccuracyPane #confusion { height: auto; padding: 0 1; }
    AccuracyPane #check { height: auto; padding: 0 1; color: $warning; }
    """

    def __init__(self, root: Path, **kwargs):
        super().__init__(root, **kwargs)
        self.runs = Runs()
        self.summary: IntegrationSummary | None = None
        self.show_funnel = False  # w: the selected run's class funnel in place of its classes
        self.figures = ("accuracy", "macro-F1")  # the columns' figures: the teachers' kind's
        # The row the pane put the cursor on: while it is still there, the cursor follows the
        # best run (the pane opens on it, not on the first run, often a baseline's); once the
        # user moves it, it stays where they put it.
        self.placed_row = 0

    def compose(self) -> ComposeResult:
        table = Table(id="runs-table", cursor_type="row")
        table.add_columns(*self._column_names())
        yield table
        with VerticalScroll(id="run-detail"):
            yield Static("", id="check")
            yield Plot(id="curves")
            yield Plot(id="per-class")
            yield Static("", id="confusion")

    def on_mount(self) -> None:
        self._head_columns()
        self.redraw()

    def main_widget(self) -> DataTable:
        return self.query_one("#runs-table", DataTable)

    def _column_names(self) -> tuple[str, ...]:
        headline, second = self.figures
        return ("run", "state", headline, "best", second, "fit", "routing")

    def show_config(self, config, error, problems=()) -> None:
        super().show_config(config, error, problems)
        if self.is_mounted:
            self._head_columns()

    def apply_changes(self, changes: StoreChanges) -> None:
        changed = any([self.runs.add(event) for event in changes.events])
        if changes.integration is not None:
            self.summary, changed = changes.integration.summary, True
            self._head_columns()
        if changed:
            self.redraw()

    def _head_columns(self) -> None:
        """The teachers' kind's own figures head the columns."""
        kind = self.teachers_kind(self.summary)
        if kind.words.accuracy_columns != self.figures:
            self.figures = kind.words.accuracy_columns
            table = self.main_widget()
            table.clear(columns=True)
            table.add_columns(*self._column_names())
            self.redraw()

    def redraw(self) -> None:
        rows = {run.run: run_cells(run) for run in self.runs}
        rows.update(baseline_rows(self.summary))
        rows.update(task_baseline_rows(self.summary))
        rows.update(probe_baseline_rows(self.summary))
        table = self.main_widget()
        sync_rows(table, rows)
        best = best_run_row(self.runs, [row.key.value for row in table.ordered_rows])
        if best is not None and table.cursor_row == self.placed_row:
            if best != table.cursor_row:
                table.move_cursor(row=best, animate=False)
            self.placed_row = best
        self._show_run()

    def action_funnel(self) -> None:
        self.show_funnel = not self.show_funnel
        self._show_run()

    @on(DataTable.RowHighlighted, "#runs-table")
    def _show_run(self) -> None:
        run = self._selected()
        curves, per_class = self.query_one("#curves", Plot), self.query_one("#per-class", Plot)
        confusion = self.query_one("#confusion", Static)
        warning = self.query_one("#check", Static)
        warning.update(Text(check_line(run)))  # Text: "[training]" is no markup
        warning.display = bool(warning.content)
        if run is None:
            note = ("No training runs yet: in Jobs (3) press t to train a student." if not len(self.runs)
                    else "An untrained baseline: pick a run above to see its curves.")
            curves.show(note, None, 0)
            per_class.show("", None, 0)
            confusion.update("")
            return
        steps = f"{run.step:,}/{run.total_steps:,}" if run.total_steps else f"{run.step:,}"
        # a run named after its method (muki-hard) is not named twice
        named = run.run if run.method in (None, run.run) else f"{run.run} · {run.method}"
        curves.show(f"{named} · step {steps}: loss and accuracy",
                    _curves(run), 2)
        latest = run.latest_eval
        if self.show_funnel:
            per_class.show(*funnel_view(run), 0)
            confusion.update(funnel_table(run) or "")
            return
        if latest is None:
            per_class.show("No evaluation yet (needs a labeled eval set in Data, 2).", None, 0)
            confusion.update("")
            return
        probes = probes_of(latest)  # an embedding student's: the probes, no classes
        if probes is not None:
            names = self.teachers_kind(self.summary).words.figure_names
            shown = [(names.get(name, name), value) for name, value in probes.items()]
            per_class.show(f"Probes at step {latest.step}",
                           lambda width, styles: plots.labelled_bars(shown, width,
                                                                     style=styles.bar), len(shown))
            confusion.update(probe_table(run.run, probes, self.summary, names))
            return
        classes = list(latest.per_class_accuracy.items())
        token = latest.entity is not None  # a tagger's: F1 per type, the entity confusion
        tasks = task_figures_of(latest)  # a multi-task student's: each task's figures
        labels = latest.details is not None and tasks is None  # a multi-label student's
        title = ("F1 per type" if token else "F1 per label" if labels else
                 "Per task/class: accuracy (single-label tasks), F1 (multi-label)" if tasks
                 else "Per-class accuracy")
        per_class.show(f"{title} at step {latest.step}",
                       lambda width, styles: plots.labelled_bars(classes, width, style=styles.bar),
                       len(classes))
        if token:
            confusion.update(entity_confusion(latest.entity))
            return
        if tasks:
            confusion.update(task_table(tasks))
            return
        if labels:
            confusion.update(label_figures(latest))
            return
        matrix, labels = latest.confusion, [label for label, _ in classes]
        confusion.update(plots.confusion_table(labels, matrix, title="Confusion (gold down, predicted across)")
                         if matrix and len(matrix) == len(labels) else "")

    def _selected(self) -> RunHistory | None:
        table = self.main_widget()
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return self.runs.by_name.get(key)


def entity_confusion(entity: dict):
    """A tagger's entity confusion (types and O: found nothing, or nothing was there) with
    the gold entities it found with other boundaries, and its strict and word figures."""
    found = entity["confusion"]
    table = plots.confusion_table(found["labels"], found["matrix"],
                                  title="Entities: gold type down, predicted across (O: none)")
    errors = ", ".join(f"{name} {count}" for name, count in entity["boundary_errors"].items()
                       if count) or "none"
    note = Text(f"boundary errors (right type, other span): {errors} · strict IOB2 F1 "
                f"{_percent(entity['strict']['f1'])} · precision {_percent(entity['precision'])}"
                f" · recall {_percent(entity['recall'])} · word accuracy "
                f"{_percent(entity['word_accuracy'])}", "dim")
    return Group(table, note)


def funnel_view(run: RunHistory) -> tuple[str, None]:
    """The heading of the class funnel view (w) of a run: what it shows, or why it cannot."""
    if run.funnel is None:
        return ("No class funnel: supervised, or trained by an older kiwb (w: back)", None)
    # one line that fits 80 columns; the recall table names its texts in its own title
    return (f"Where each class goes, over {run.funnel.num_texts:,} pool texts (w: back)", None)


def funnel_table(run: RunHistory) -> RichTable | Group | None:
    """The run's class funnel, the student's recall from its kept (or latest) evaluation."""
    if run.funnel is None:
        return None
    evaluation = run.best_eval or run.latest_eval
    recall = None
    if evaluation is not None and run.funnel.labeled is not None:  # a tagger's: entity recall
        recall = ((evaluation.entity or {}).get("per_type_recall")
                  or evaluation.per_class_accuracy)
    rows = run.funnel.rows(recall)
    left = ("class", "owner", "lost at")
    # two tables, as kiwb integrate prints them: side by side their 13 columns fit no screen
    pool = plots.rows_table([{name: row[name] for name in POOL_COLUMNS} for row in rows],
                            title="On the pool", left=left)
    if run.funnel.labeled is None:
        return pool
    recall = plots.rows_table([{name: row[name] for name in RECALL_COLUMNS if name in row}
                               for row in rows],
                              title=f"Recall on {run.funnel.labeled.where}", left=left)
    return Group(pool, Text(""), recall)


def best_run_row(runs: Runs, order: list[str]) -> int | None:
    """The row of the run whose kept checkpoint scores highest (the first of the highest), or
    None while no run is evaluated. `order`: the table's row keys, top down."""
    scored = [(run.best_eval.accuracy, run.run) for run in runs if run.best_eval is not None]
    if not scored:
        return None
    top = max(figure for figure, _ in scored)
    return min(order.index(name) for figure, name in scored if figure == top and name in order)


def is_merge(run: RunHistory) -> bool:
    """A run `kiwb merge` made: merged weights, evaluated like a trained student."""
    return (run.method or "").startswith("merge-")


def run_cells(run: RunHistory) -> tuple:
    latest, best = run.latest_eval, run.best_eval
    share = f" {100 * run.step / run.total_steps:.0f}%" if run.total_steps and run.state == "running" else ""
    state: str | Text = ("merged" if is_merge(run) and run.state == "done" else run.state) + share
    check = shown_check(run)
    if check is not None:  # the mark; the line under the table says what it is, and why
        state = Text.assemble(state, (" ⚠", "bold yellow"))
    # how well the student reproduces its own targets on pool texts it trained on
    fit = _percent(run.check.fit if run.check is not None else None)
    if latest is None:
        return (run.run, state, _percent(None), "–", _percent(None), fit, _routing(None))
    return (run.run, state, _percent(latest.accuracy), f"{_percent(best.accuracy)} @{best.step}",
            _percent(latest.macro_f1), fit, _routing(latest.routing_accuracy, run.routing))


def shown_check(run: RunHistory | None) -> LearningCheck | None:
    """The run's flagged check worth a mark: a running run's early evaluations are often
    below the Ensemble, so until it is done only collapsed classes are marked."""
    check = run.check if run is not None else None
    if check is None or not check.flagged or (run.state != "done" and check.status != COLLAPSED):
        return None
    return check


def check_line(run: RunHistory | None) -> str:
    """What the learning check found on the run, with what to try; empty when all is well."""
    check = shown_check(run)
    if check is None:
        return ""
    when = "the kept checkpoint" if run.state == "done" else "the latest evaluation"
    return f"⚠ {check.line('the student')} (at {when})"


def baseline_rows(summary: IntegrationSummary | None) -> dict[str, tuple]:
    """Untrained references from the integration: the Ensemble, and each teacher alone."""
    rows = {}
    evaluation = summary.eval if summary is not None else None
    if evaluation is None:
        return rows
    if evaluation.ensemble_accuracy is not None:
        rows[ENSEMBLE_ROW] = (Text("ensemble", "italic"), "untrained",
                              _percent(evaluation.ensemble_accuracy), "", "", "",
                              _routing(evaluation.routing_accuracy, summary.routed_by))
    for teacher, accuracy in (evaluation.teacher_accuracy or {}).items():
        rows[f"{TEACHER_ROW}{teacher}"] = (Text(f"{teacher} alone", "italic"), "teacher",
                                           _percent(accuracy), "", "", "", "")
    return rows


def task_baseline_rows(summary: IntegrationSummary | None) -> dict[str, tuple]:
    """A multi-task integration's untrained references per task: its teachers' Ensemble and
    each teacher alone, on the eval set (the runs' column holds the tasks' mean)."""
    tasks = (summary.details or {}).get("tasks") if summary is not None else None
    rows = {}
    for task, figures in (tasks or {}).items():
        evaluation = figures.get("eval") or {}
        if evaluation.get("ensemble") is not None:
            rows[f"{ENSEMBLE_ROW}:{task}"] = (Text(f"ensemble · {task}", "italic"), "untrained",
                                              _percent(evaluation["ensemble"]), "", "", "", "")
        for teacher, value in (evaluation.get("teachers") or {}).items():
            rows[f"{TEACHER_ROW}{teacher}:{task}"] = (Text(f"{teacher} alone · {task}", "italic"),
                                                      "teacher", _percent(value), "", "", "", "")
    return rows


def probe_rows_of(summary: IntegrationSummary | None) -> dict[str, dict]:
    """An integration's untrained references on the eval set as probes read them (an
    embedding integration's: each teacher alone, their concatenation and their average),
    {row: {probe: value}}; none where its eval details hold no probe rows."""
    evaluation = ((summary.details or {}).get("eval") or {}) if summary is not None else {}
    return evaluation.get("rows") or {}


def probe_baseline_rows(summary: IntegrationSummary | None) -> dict[str, tuple]:
    """The references of probe_rows_of as rows of the runs table (its two figures: kNN
    accuracy, or MRR without labels, and MRR)."""
    rows = {}
    teachers = set(summary.teachers) if summary is not None else set()
    for name, figures in probe_rows_of(summary).items():
        label = f"{name} alone" if name in teachers else name
        rows[f"{TEACHER_ROW}{name}"] = (
            Text(label, "italic"), "teacher" if name in teachers else "untrained",
            _percent(figures.get("knn_accuracy", figures.get("mrr"))), "",
            _percent(figures.get("mrr")), "", "")
    return rows


def probes_of(evaluation) -> dict | None:
    """An embedding student's probe figures of an evaluation, or None (another kind's)."""
    return (evaluation.details or {}).get("probes") if evaluation.details else None


def probe_table(run: str, probes: dict, summary: IntegrationSummary | None,
                words: Mapping[str, str]) -> RichTable:
    """The run's probes beside the untrained references' (`words`: the kind's names of them)."""
    table = RichTable(title="Probes on the eval set: the student against the teachers",
                      title_justify="left")
    names = list(probes)
    table.add_column("")
    for name in names:
        table.add_column(words.get(name, name), justify="right")
    table.add_row(run, *(_percent(probes[name]) for name in names), style="bold")
    for row, figures in probe_rows_of(summary).items():
        table.add_row(row, *(_percent(figures.get(name)) for name in names))
    return table


def task_figures_of(evaluation) -> dict | None:
    """A multi-task student's per-task figures of an evaluation, or None (another kind's)."""
    return (evaluation.details or {}).get("tasks") if evaluation.details else None


def task_table(tasks: dict) -> RichTable:
    """Each task's figures: its headline (accuracy, or micro F1 at 0.5 with the tuned
    thresholds' beside it) and macro F1."""
    table = RichTable(title="Tasks (the run's accuracy column: their mean)", title_justify="left")
    for column in ("task", "kind", "headline", "macro F1", "tuned micro F1", "texts"):
        table.add_column(column, justify="left" if column in ("task", "kind") else "right")
    for task, figures in tasks.items():
        single = figures["kind"] == SINGLE_LABEL_TASK
        table.add_row(task, figures["kind"],
                      f"{'accuracy' if single else 'micro F1'} {_percent(figures['headline'])}",
                      _percent(figures["macro_f1"]),
                      "" if single else _percent(figures.get("tuned_micro_f1")),
                      f"{figures['texts']:,}")
    return table


def _routing(routing: RoutingAccuracy | None, name: str | None = None) -> str:
    """The chosen routing's accuracy, `name`d, with MC dropout's beside it (runs recorded by
    older versions of kiwb have only MC dropout and plain confidence)."""
    if routing is None:
        return "–"
    if routing.chosen is not None and name:  # MC's beside it: the Uncertainty pane
        return f"{name} {_percent(routing.chosen)}"
    return f"{_percent(routing.mc_dropout)} / {_percent(routing.plain_confidence)}"


def label_figures(evaluation) -> Text:
    """A multi-label student's figures beside F1 per label: micro and macro F1, Hamming loss
    and subset accuracy at its thresholds, and micro F1 with thresholds tuned on this set."""
    details = evaluation.details
    return Text(f"micro F1 {_percent(evaluation.accuracy)} · macro F1 "
                f"{_percent(evaluation.macro_f1)} · Hamming loss "
                f"{details['hamming_loss']:.4f} · subset accuracy "
                f"{_percent(details['subset_accuracy'])} · with thresholds tuned on these texts: "
                f"micro F1 {_percent(details.get('tuned_micro_f1'))}", "dim")


def _curves(run: RunHistory):
    accuracy = [evaluation.accuracy for evaluation in run.evals]

    def draw(width: int, styles: PlotStyles) -> Text:
        label_width = 26
        line_width = max(width - label_width, 4)
        text = Text()
        if run.losses:
            text.append(f"loss {run.losses[0]:.3f} → {run.losses[-1]:.3f}".ljust(label_width))
            text.append_text(plots.sparkline(run.losses, line_width, style=styles.alt))
        elif is_merge(run):
            text.append("a weight merge of the teachers (kiwb merge): no training steps", "dim")
        else:
            text.append("loss: no steps logged yet", "dim")
        text.append("\n")
        if accuracy:
            last = run.evals[-1]
            name = ("entity F1" if last.entity is not None
                    else "probe score" if probes_of(last) is not None
                    else "mean task score" if task_figures_of(last) is not None
                    else "micro F1" if last.details is not None else "accuracy")
            text.append(f"{name} {_percent(accuracy[0])} → {_percent(accuracy[-1])}"
                        .ljust(label_width))
            text.append_text(plots.sparkline(accuracy, line_width, style=styles.bar))
        else:
            text.append("accuracy: no evaluation yet", "dim")
        return text

    return draw


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"
