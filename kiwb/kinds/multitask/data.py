"""Reading a multi-task project's data: the texts, and each task's gold labels from a column of
its own ([[tasks]] column, the task's name by default). A single-label task's column holds a
label per text; a multi-label task's a list per text, or one string split by its
label_separator."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kiwb.errors import DataError
from kiwb.kinds.multilabel.data import _label_set
from kiwb.project.config import ProjectConfig
from kiwb.workers.data import TextTable, _checked_labels, load_table, open_text_columns, row_name

if TYPE_CHECKING:
    import torch

MISSING = -1.0  # a task's gold slice on a text the data set gives no label for that task
LABELED_ROLES = ("eval", "labeled", "evaluate")  # evaluate: kiwb evaluate --data


def load_role_table(path: str, spec, role: str, config: ProjectConfig | None = None) -> TextTable:
    """The multi-task kind's load_table: a data set's texts and, with the project's `config`,
    each task's gold labels (`task_gold`)."""
    table = load_table(path, text_column=spec.text_column, split=spec.split, limit=spec.limit,
                       role=role, subset=spec.subset)
    if config is None:
        return table
    return dataclasses.replace(table, task_gold=task_gold(config, path, spec, role))


def task_gold(config: ProjectConfig, path: str, spec, role: str) -> dict[str, list]:
    """The gold labels of each task a data set holds, by task name. The eval and labeled sets
    must hold a column for every task their `tasks` names (every task by default); the
    unlabeled set's columns are read where present (the supervised run and its own figures)."""
    dataset = open_text_columns(path, ((spec.text_column, "text_column"),), spec.split, spec.limit,
                                role, subset=spec.subset)
    columns = set(dataset.column_names)
    wanted = [task for task in config.tasks if spec.tasks is None or task.name in spec.tasks]
    found = {}
    for task in wanted:
        if task.gold_column not in columns:
            if role not in LABELED_ROLES:
                continue
            others = ", ".join(f'"{other.name}"' for other in wanted
                               if other.gold_column in columns)
            section = "eval" if role == "evaluate" else role  # kiwb evaluate --data reads it
            fix = (f"or evaluate the other tasks only: set tasks = [{others}] in [data.{section}]"
                   if others else "or name the column with column = ... in the task's [[tasks]] "
                   "entry")
            raise DataError(f"{path}: no column {task.gold_column!r} with the gold labels of task "
                            f"{task.name!r} (columns: {', '.join(sorted(columns))}); add it, {fix}")
        values = dataset[task.gold_column]
        if task.kind == "single-label":
            found[task.name] = _checked_labels(values, dataset.features[task.gold_column], path)
        else:
            found[task.name] = [_label_set(value, path, row, task.gold_column,
                                           task.label_separator, role)
                                for row, value in enumerate(values)]
    return found


def check_known(gold: list, labels: list[str], task: str, source: str, multi: bool) -> None:
    """Every gold label of a task is one of its labels; else one line naming it."""
    known = set(labels)
    for row, value in enumerate(gold):
        unknown = [label for label in (value if multi else [value]) if label not in known]
        if unknown:
            raise DataError(f"{source}: {row_name(source, row)} gives task {task!r} the label {unknown[0]!r}, "
                            f"which none of its teachers knows ({', '.join(labels)}); fix the "
                            "label, or list it in the task's labels")


def laid_out_gold(heads, gold: dict[str, list], count: int) -> torch.Tensor:
    """(count, outputs) gold: one-hot (single-label) or 0/1 (multi-label) in each task's slice,
    MISSING in the slices of tasks the data set has no labels for."""
    import torch  # here: reading a data set (the CLI's label commands) loads no torch

    found = torch.full((count, heads[-1].stop), MISSING)
    for head in heads:
        if head.task not in gold:
            continue
        index = {label: i for i, label in enumerate(head.labels)}
        block = torch.zeros(count, len(head.labels))
        for row, value in enumerate(gold[head.task]):
            for label in ([value] if head.kind == "single-label" else value):
                block[row, index[label]] = 1.0
        found[:, head.start:head.stop] = block
    return found


def gold_of(heads, table) -> torch.Tensor:
    """A table's gold labels laid out on the student's outputs (checked against its labels)."""
    gold = table.task_gold or {}
    for head in heads:
        if head.task in gold:
            check_known(gold[head.task], list(head.labels), head.task, table.source,
                        head.kind == "multi-label")
    return laid_out_gold(heads, gold, len(table.texts))
