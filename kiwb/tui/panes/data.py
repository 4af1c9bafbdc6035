"""Data: the unlabeled texts and the optional labeled evaluation set, with a few sample rows."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kiwb.tui import config_edit
from kiwb.tui.inspect import DatasetSummary
from kiwb.tui.messages import ConfigLoaded
from kiwb.tui.panes.base import Pane
from kiwb.tui.screens.forms import Field, FormScreen
from kiwb.tui.widgets import Table

ROLES = {"unlabeled": "Unlabeled texts (scored by the teachers, learned by the student)",
         "eval": "Labeled evaluation set (optional)"}
SAMPLE_TEXT_WIDTH = 60


class DataPane(Pane):
    """Each data set: file, format, rows, columns, label counts and sample rows."""

    TITLE = "Data"
    DEFAULT_CSS = """
    DataPane DataTable { height: auto; max-height: 5; }
    """
    BINDINGS = [
        Binding("u", "edit('unlabeled')", "Unlabeled set"),
        Binding("v", "edit('eval')", "Eval set"),
        Binding("x", "remove_eval", "Remove eval set"),
    ]

    def compose(self) -> ComposeResult:
        for role, heading in ROLES.items():
            yield Static(heading, classes="heading")
            yield Static("", id=f"{role}-facts", classes="note")
            yield Table(id=f"{role}-samples", show_cursor=False)

    def main_widget(self) -> DataTable:
        return self.query_one("#unlabeled-samples", DataTable)

    def show_config(self, config, error, problems=()) -> None:
        super().show_config(config, error, problems)
        if config is None:
            for role in ROLES:
                self.query_one(f"#{role}-facts", Static).update(error or "")
            return
        for role in ROLES:
            if getattr(config.data, role) is None:
                hint = "u" if role == "unlabeled" else "v"
                self.query_one(f"#{role}-facts", Static).update(f"not set: press {hint} to choose a file")
                self.query_one(f"#{role}-samples", DataTable).clear(columns=True)

    def __init__(self, root, **kwargs):
        super().__init__(root, **kwargs)
        self.summaries: dict[str, DatasetSummary] = {}

    def show_summaries(self, summaries: list[DatasetSummary]) -> None:
        self.summaries = {summary.role: summary for summary in summaries}
        for summary in summaries:
            self.query_one(f"#{summary.role}-facts", Static).update(facts(summary))
            table = self.query_one(f"#{summary.role}-samples", DataTable)
            table.clear(columns=True)
            columns = [c for c in (summary.text_column, summary.label_column)
                       if c and (not summary.columns or c in summary.columns)]
            if summary.problem or not summary.samples or not columns:
                continue
            table.add_columns(*columns)
            for sample in summary.samples:
                table.add_row(*(_cell(sample.get(column)) for column in columns))

    def action_edit(self, role: str) -> None:
        config = self.config
        if config is None:
            self.notify("no usable kiwb.toml yet; see the Teachers pane", severity="error")
            return
        spec, summary = getattr(config.data, role), self.summaries.get(role)
        columns = (f" Columns of {summary.path}: {', '.join(summary.columns)}."
                   if summary and summary.columns else "")
        fields = [
            Field("path", "file", spec.path if spec else "", placeholder="data/texts.csv"),
            Field("text_column", "text column", spec.text_column if spec else "text"),
            Field("label_column", "label column", (spec.label_column or "") if spec else
                  ("label" if role == "eval" else ""),
                  placeholder="required for eval" if role == "eval" else "optional"),
            Field("limit", "limit", str(spec.limit or "") if spec else "", placeholder="all rows"),
            Field("split", "split", (spec.split or "") if spec else "",
                  placeholder="where it has several: train, test, ..."),
            Field("subset", "subset", (spec.subset or "") if spec else "",
                  placeholder="a Hub data set's, where it has several"),
        ]
        self.app.push_screen(FormScreen(
            ROLES[role], fields,
            lambda v: config_edit.set_dataset(config, role, v["path"], v["text_column"],
                                              v["label_column"], v["limit"], v["split"],
                                              v["subset"]),
            browse="path", browse_root=Path.cwd(),
            note="csv, tsv, jsonl, json or parquet, a folder saved with save_to_disk, or a Hub "
                 "data set as hf://datasets/ORG/NAME." + columns),
            self._config_written)

    def action_remove_eval(self) -> None:
        config = self.config
        if config is None or config.data.eval is None:
            return
        self.app.push_screen(FormScreen(
            "Remove the evaluation set?", [],
            lambda _values: config_edit.set_dataset(config, "eval", ""),
            note="Without it there is no accuracy, routing accuracy or best checkpoint by accuracy."),
            self._config_written)

    def _config_written(self, config) -> None:
        if config is not None:
            self.post_message(ConfigLoaded(config))


def facts(summary: DatasetSummary) -> Text:
    """One or two lines about a data set, or its problem with what to do."""
    text = Text(summary.path, "bold")
    if summary.problem:
        text.append(f"\n{summary.problem}", "red")
        return text
    rows = "?" if summary.rows is None else f"{summary.rows:,}"
    text.append(f"  {summary.format} · {rows} rows · text column {summary.text_column!r}")
    if summary.label_column:
        text.append(f" · labels {summary.label_column!r}")
    if summary.label_counts:
        counts = ", ".join(f"{label} {n:,}" for label, n in
                           sorted(summary.label_counts.items(), key=lambda item: -item[1])[:8])
        text.append(f"\nlabels: {counts}", "dim")
    return text


def _cell(value) -> str:
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= SAMPLE_TEXT_WIDTH else text[:SAMPLE_TEXT_WIDTH - 1] + "…"
