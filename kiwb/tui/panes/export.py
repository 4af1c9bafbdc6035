"""Export: a run's checkpoint written as a plain Hugging Face model, and how to load it."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Checkbox, DataTable, Input, Label, Select, Static

from kiwb.errors import ConfigError
from kiwb.kinds import DEFAULT_KIND, TeacherKind, kind_named
from kiwb.project.job_specs import ExportSpec
from kiwb.project.jobs import JobState
from kiwb.project.paths import ProjectPaths
from kiwb.project.queries import RunFolder, StoreChanges, run_folders
from kiwb.project.teacher_kinds import project_kind
from kiwb.tui import launcher
from kiwb.tui.background import run_in_thread
from kiwb.tui.messages import ActionDone, RunsFound
from kiwb.tui.panes.base import Pane
from kiwb.tui.widgets import Table, show, sync_rows

LOAD_SNIPPET = """from transformers import pipeline
classify = pipeline("text-classification", model="{destination}")
classify("Shares jumped after the bank reported record profits")"""


def load_snippet(kind: TeacherKind, destination: str) -> str:
    """How to use an export of the kind: a text classifier through a pipeline, another kind
    as its model card says (a sentence encoder through sentence-transformers)."""
    if kind.name == DEFAULT_KIND:
        return LOAD_SNIPPET.format(destination=destination)
    card = kind.words.card
    use = card["use"] if "use" in card else "\n".join(
        ("from transformers import pipeline", card["pipeline"], card["call"]))
    return use.replace("PATH/TO/THIS/FOLDER", destination)


class ExportPane(Pane):
    """Trained runs, a checkpoint and destination, the export job, and the loading snippet."""

    TITLE = "Export"
    DEFAULT_CSS = """
    ExportPane #export-runs { height: auto; max-height: 8; }
    ExportPane .export-row { height: 1; margin-top: 1; }
    ExportPane .export-row Label { width: 13; }
    ExportPane #export-checkpoint { width: 22; }
    ExportPane #export-destination, ExportPane #export-hub { width: 1fr; }
    ExportPane #export-private { width: auto; border: none; padding: 0; height: 1; margin-left: 1; }
    ExportPane #export-force { width: auto; border: none; padding: 0; height: 1; margin-left: 1; }
    ExportPane #export-go { margin-left: 1; }
    ExportPane #export-how { margin-top: 1; height: auto; }
    """
    BINDINGS = [Binding("e", "export", "Export run")]

    def __init__(self, root: Path, **kwargs):
        super().__init__(root, **kwargs)
        self.runs: dict[str, RunFolder] = {}
        self.export_jobs: list[JobState] = []
        self.seen_train_state: tuple = ()
        self.checkpoint_options: list[tuple[str, str]] = []
        self.snippet = ""

    def compose(self) -> ComposeResult:
        table = Table(id="export-runs", cursor_type="row")
        table.add_columns("run", "method", "checkpoints", "best step", "best accuracy")
        yield table
        yield Static("No trained runs yet: in Jobs (3) press t to train a student.",
                     id="export-empty", classes="note")
        with Horizontal(classes="export-row"):
            yield Label("checkpoint")
            yield Select([("best", "best"), ("last", "last")], value="best", allow_blank=False,
                         id="export-checkpoint", compact=True)
            yield Checkbox("replace", id="export-force", compact=True)
            yield Button("Export", id="export-go", variant="primary", compact=True)
        with Horizontal(classes="export-row"):
            yield Label("destination")
            yield Input(placeholder="default: PROJECT/exports/RUN", id="export-destination",
                        compact=True)
        with Horizontal(classes="export-row"):
            yield Label("push to Hub")
            yield Input(placeholder="optional: ORG/NAME, a Hub model repository to upload to",
                        id="export-hub", compact=True)
            yield Checkbox("private", id="export-private", compact=True)
        yield Static("", id="export-status")
        yield Static("", id="export-how")

    def main_widget(self) -> DataTable:
        return self.query_one("#export-runs", DataTable)

    def shown(self) -> None:
        super().shown()
        self.find_runs()

    def find_runs(self) -> None:
        root = self.root
        run_in_thread(self, lambda: RunsFound(run_folders(root)), action="listing runs",
                      group="export-runs", exclusive=True)

    def apply_changes(self, changes: StoreChanges) -> None:
        self.export_jobs = [job for job in changes.jobs if job.kind == "export"]
        train_state = tuple((job.id, job.status) for job in changes.jobs if job.kind == "train")
        if train_state != self.seen_train_state or any(e["kind"] == "train.eval" for e in changes.events):
            self.seen_train_state = train_state
            self.find_runs()
        self._show_selected()

    def on_runs_found(self, message: RunsFound) -> None:
        self.runs = {run.run: run for run in message.runs}
        sync_rows(self.main_widget(), {run.run: run_cells(run) for run in message.runs})
        self.query_one("#export-empty", Static).display = not message.runs
        self._show_selected()

    @on(DataTable.RowHighlighted, "#export-runs")
    @on(Input.Changed, "#export-destination")
    def _show_selected(self) -> None:
        run = self._selected()
        select = self.query_one("#export-checkpoint", Select)
        if run is None:
            self.snippet = ""
            show(self.query_one("#export-how", Static), "")
            return
        steps = [(name, name) for name in reversed(run.checkpoints)]
        options = [("best", "best"), ("last", "last"), *steps]
        if options != self.checkpoint_options:
            current = select.value
            self.checkpoint_options = options
            select.set_options(options)
            select.value = current if current in dict(options).values() else "best"
        snippet = load_snippet(self._kind(), self._destination(run.run))
        if snippet != self.snippet:
            self.snippet = snippet
            self.query_one("#export-how", Static).update(Syntax(
                snippet, "python", theme="ansi_dark", background_color="default", word_wrap=True))
        show(self.query_one("#export-status", Static), self._job_line(run.run))

    def _kind(self) -> TeacherKind:
        """The teachers' kind, whose export this pane shows how to load."""
        try:
            return kind_named(project_kind(self.config)) if self.config else kind_named(None)
        except ConfigError:
            return kind_named(None)

    def _job_line(self, run: str) -> Text:
        jobs = [job for job in self.export_jobs if job.run == run]
        if not jobs:
            return Text("Not exported from the workbench yet.", "dim")
        job = jobs[-1]
        text = Text(f"export job {job.id}: {job.status}", "bold")
        if job.error:
            text.append(f"\n{job.error}", "red")
        elif job.status == "finished":
            text.append(f" → {(job.ending or {}).get('destination', '')}")
            if (job.ending or {}).get("hub"):  # uploaded too: where the Hub keeps it
                text.append(f" · on the Hub: {job.ending['hub']}")
        return text

    def _selected(self) -> RunFolder | None:
        table = self.main_widget()
        if not table.row_count:
            return None
        return self.runs.get(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value)

    def _destination(self, run: str) -> str:
        typed = self.query_one("#export-destination", Input).value.strip()
        return str(Path(typed).expanduser().resolve()) if typed else \
            str(ProjectPaths(self.root).exports / run)

    @on(Button.Pressed, "#export-go")
    def action_export(self) -> None:
        run = self._selected()
        if run is None:
            self.notify("no trained run to export yet", severity="warning")
            return
        spec = ExportSpec(run=run.run, checkpoint=str(self.query_one("#export-checkpoint", Select).value),
                          destination=self._destination(run.run),
                          force=self.query_one("#export-force", Checkbox).value,
                          push_to_hub=self.query_one("#export-hub", Input).value.strip() or None,
                          private=self.query_one("#export-private", Checkbox).value)
        root = self.root
        run_in_thread(self, lambda: ActionDone(
            f"started export job {launcher.launch(root, spec)} for run {run.run}"),
            action="exporting")


def run_cells(run: RunFolder) -> tuple:
    best = run.best or {}
    accuracy = (best.get("metrics") or {}).get("accuracy")
    return (run.run, run.method or "", str(len(run.checkpoints)), str(best.get("step", "–")),
            "–" if accuracy is None else f"{100 * accuracy:.1f}%")
