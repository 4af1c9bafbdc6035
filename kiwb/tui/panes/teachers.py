"""Teachers: the checkpoints to integrate, their labels, architecture, size and tokenizer."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kiwb.kinds import KINDS
from kiwb.tui import config_edit
from kiwb.tui.background import run_in_thread
from kiwb.tui.inspect import TeacherSummary, human_size, union_with_overlaps
from kiwb.tui.messages import ActionDone, ConfigLoaded
from kiwb.tui.panes.base import Pane
from kiwb.tui.screens.forms import Field, FormScreen
from kiwb.tui.widgets import Table


class TeachersPane(Pane):
    """A table of teachers, the union label set with shared labels marked, and problems."""

    TITLE = "Teachers"
    BINDINGS = [
        Binding("a", "add", "Add teacher"),
        Binding("d", "remove", "Remove"),
        Binding("e", "labels", "Override labels"),
        Binding("n", "new_project", "New project", show=False),
    ]

    def __init__(self, root: Path, **kwargs):
        super().__init__(root, **kwargs)
        self.summaries: list[TeacherSummary] = []

    def compose(self) -> ComposeResult:
        table = Table(id="teachers-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("teacher", "labels", "architecture", "tokenizer", "size", "status")
        yield table
        yield Static("", id="union")
        yield Static("", id="teacher-detail")
        yield Static("", id="teachers-hint", classes="note")

    def main_widget(self) -> DataTable:
        return self.query_one("#teachers-table", DataTable)

    def show_config(self, config, error, problems=()) -> None:
        super().show_config(config, error, problems)
        hint = self.query_one("#teachers-hint", Static)
        if problems:  # kiwb.toml reads, but names something missing: fix it or remove it here
            hint.update("\n".join(problem.message for problem in problems)
                        + "\nRestore it, or select that teacher and remove it with d (or edit kiwb.toml).")
        elif config is None:
            no_file = error is not None and "no kiwb.toml" in error
            hint.update((error or "") + ("\nPress n to create a project here." if no_file else
                                         "\nFix the file; the workbench reads it again when it changes."))
        elif len(config.teachers) < 2 and not config.tasks and config.embedding is None:
            # multi-task: one teacher per task will do; embedding: one encoder distils alone
            hint.update("kiwb integrates two or more teachers: press a to add one.")
        else:
            hint.update("")
        if config is not None and not config.teachers:
            self.show_summaries([])

    def show_summaries(self, summaries: list[TeacherSummary]) -> None:
        self.summaries = summaries
        table = self.main_widget()
        row = table.cursor_row
        table.clear()
        for summary in summaries:
            status = Text("ok", "green") if summary.problem is None else Text("✗ problem", "red")
            labels = ", ".join(summary.labels) or "–"
            if summary.tasks:  # a multi-task project's teacher: the tasks it answers first
                labels = f"{', '.join(summary.tasks)}: {labels}"
            table.add_row(summary.name, labels,
                          short_architecture(summary),
                          summary.tokenizer.replace("TokenizerFast", "") or "–",
                          human_size(summary.size_bytes), status, key=summary.name)
        if summaries:
            table.move_cursor(row=min(row, len(summaries) - 1))
        usable = [s for s in summaries if s.problem is None]
        if self.config is not None and self.config.tasks:
            self.query_one("#union", Static).update(task_lines(self.config, usable))
            self._show_detail()
            return
        if self.config is not None and self.config.embedding is not None:
            self.query_one("#union", Static).update(encoder_line(self.config, usable))
            self._show_detail()
            return
        union = union_with_overlaps([s.labels for s in usable])
        token = any(KINDS[s.kind].checkpoints.reads_words for s in usable)
        text = Text("union entity types (BIO tags for each): " if token else "union labels: ",
                    "bold")
        for number, (label, teachers) in enumerate(union):
            text.append(", " if number else "")
            text.append(label + ("*" if teachers > 1 else ""), "bold" if teachers > 1 else "")
        if any(teachers > 1 for _, teachers in union):
            text.append("   * shared by several teachers", "dim")
        self.query_one("#union", Static).update(text if union else "")
        self._show_detail()

    @on(DataTable.RowHighlighted, "#teachers-table")
    def _show_detail(self) -> None:
        selected = self._selected()
        self.query_one("#teacher-detail", Static).update(detail(selected) if selected else "")

    def _selected(self) -> TeacherSummary | None:
        table = self.main_widget()
        if not self.summaries or table.cursor_row >= len(self.summaries):
            return None
        return self.summaries[table.cursor_row]

    # -- actions -------------------------------------------------------------------------
    def action_add(self) -> None:
        config = self.config
        if config is None:
            self.notify("no usable kiwb.toml yet; see the Teachers pane", severity="error")
            return
        fields = [Field("name", "name", placeholder="world-sports"),
                  Field("path", "folder / hub id", placeholder="models/world-sports or org/model"),
                  Field("labels", "labels", placeholder="optional: World, Sports (id order)")]
        self.app.push_screen(FormScreen(
            "Add a teacher", fields,
            lambda v: config_edit.add_teacher(config, v["name"], v["path"], v["labels"]),
            browse="path", browse_root=Path.cwd(), folders_only=True,
            note="Type a path or pick a checkpoint folder below (enter opens a folder)."),
            self._config_written)

    def action_remove(self) -> None:
        selected, config = self._selected(), self.config
        if selected is None or config is None:
            return
        self.app.push_screen(FormScreen(
            f"Remove teacher {selected.name}?", [],
            lambda _values: config_edit.remove_teacher(config, selected.name),
            note="It is removed from kiwb.toml; its stored scores stay in the project."),
            self._config_written)

    def action_labels(self) -> None:
        selected, config = self._selected(), self.config
        if selected is None or config is None:
            return
        current = config.teacher(selected.name).labels
        fields = [Field("labels", "labels", ", ".join(current or ()),
                        placeholder="empty: use the checkpoint's config.id2label")]
        self.app.push_screen(FormScreen(
            f"Labels of {selected.name}", fields,
            lambda v: config_edit.set_teacher_labels(config, selected.name, v["labels"]),
            note="Names in the checkpoint's label-id order, separated by commas."),
            self._config_written)

    def action_new_project(self) -> None:
        if self.config is not None:
            return
        run_in_thread(self, lambda: ActionDone(f"created {config_edit.new_project(self.root)}"),
                      action="creating the project")

    def _config_written(self, config) -> None:
        if config is not None:
            self.post_message(ConfigLoaded(config))


def task_lines(config, summaries: list[TeacherSummary]) -> Text:
    """A multi-task project's tasks: each with its kind and the teachers that answer it (a
    task several teachers answer is integrated; one that none answers is marked)."""
    text = Text("tasks: ", "bold")
    for number, task in enumerate(config.tasks):
        answering = [s.name for s in summaries if task.name in s.tasks]
        text.append(", " if number else "")
        text.append(task.name, "bold")
        text.append(f" ({task.kind}: ")
        text.append(" + ".join(answering) or "no teacher", "" if answering else "red")
        text.append(")")
    text.append("   a task several teachers answer is integrated per text", "dim")
    return text


def encoder_line(config, usable: list[TeacherSummary]) -> Text:
    """An embedding project's teachers and student in one line: what each encoder is, and
    what the student becomes."""
    text = Text("sentence encoders: ", "bold")
    text.append("; ".join(f"{s.name} ({', '.join(s.labels)})" for s in usable) or "none usable yet")
    text.append(f"   the student: {config.embedding.pooling} pooling, pairs weighted "
                f"{config.embedding.weighting}", "dim")
    return text


def short_architecture(summary: TeacherSummary) -> str:
    """The model class without its head's suffix, and the kind read from the checkpoint where
    the class alone does not say it (NER, multi-label: a sequence classifier's problem_type)."""
    name = summary.architecture
    kind = KINDS.get(summary.kind)
    if kind is None or not name.endswith(kind.checkpoints.architecture_suffix):
        return name or "–"
    short = name[: -len(kind.checkpoints.architecture_suffix)]
    return short + (f" ({kind.words.short_title})" if kind.words.short_title else "")


def detail(summary: TeacherSummary) -> Text:
    """The selected teacher in full, with its problem and the fix, if any."""
    text = Text(f"\n{summary.name}", "bold")
    text.append(f" · {summary.path}")
    if summary.architecture:
        text.append(f"\n{summary.architecture} ({summary.model_type}) · tokenizer {summary.tokenizer}"
                    f" · weights {human_size(summary.size_bytes)}", "dim")
    if summary.labels:
        text.append(f"\n{KINDS[summary.kind].words.knowledge_line(summary.labels, summary.scheme)}",
                    "dim")
    if summary.tasks:
        text.append(f"\nanswers tasks: {', '.join(summary.tasks)}", "dim")
    if summary.dropout:  # whether its K MC passes can differ
        plain = summary.dropout.startswith("no dropout")
        text.append(f"\n{'⚠ ' if plain else ''}{summary.dropout}", "yellow" if plain else "dim")
    if summary.seen:
        text.append(f"\nseen texts (its training texts, for the mahalanobis and knn routings): "
                    f"{summary.seen}", "dim")
    if summary.problem:
        text.append(f"\n{summary.problem}", "red")
    return text
