"""The multi-task kind: teachers answering different questions about the same texts, merged
into one student with a head per task (VENUS, thesis ch. 5).

A project is multi-task when its kiwb.toml has [[tasks]]; each teacher names the tasks it
answers. A task is single-label or multi-label, and is integrated by that kind's own pieces
(MUKI routing, kiwb.kinds.sequence.integration; the per-label integrators,
kiwb.kinds.multilabel), so a task answered by several teachers is a small single-kind project
of its own. What is the
kind's own: which outputs answer which task (heads.py), reading the teachers' heads
(teachers.py), each task's gold labels (data.py), scoring each head and the teachers' pooled
features (scoring.py), the per-task integration and its record (stored_pool.py, summary.py,
integrate_job.py), the student with one output slice per task and the feature adapters
(student.py, losses.py), training (training.py) and the exported model's use (predict.py).
Token-level tasks are out of scope: their units are words, not texts (docs/kinds/multi-task.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from kiwb.core.choices import MULTITASK_METHODS
from kiwb.kinds.base import (
    CheckpointReading,
    JobBehaviour,
    ResultWording,
    TeacherKind,
    TeacherKnowledge,
)
from kiwb.kinds.multitask.heads import CONFIG_KEY, SNIPPET


class MultiTaskCheckpoints(CheckpointReading):
    """How multi-task checkpoints are recognised and read."""

    architecture_suffix = "ForSequenceClassification"
    auto_model = "AutoModelForSequenceClassification"
    pipeline_tag = "text-classification"
    config_key = CONFIG_KEY
    declared_by = "tasks"

    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        """Its outputs as they are named (task/label); its heads are read from task_heads."""
        if override is not None:
            raise ValueError("is a multi-task model: its labels are named per head in its "
                             f"{CONFIG_KEY}; remove labels = [...] from its [[teachers]] entry")
        return TeacherKnowledge(outputs=tuple(outputs), classes=tuple(outputs))

    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        return list(dict.fromkeys(name for names in classes for name in names))


class MultiTaskWords(ResultWording):
    """How tables, logs, the workbench and the card speak of multi-task teachers."""

    title = "multi-task text classification"
    unit = "text and task"
    units = "texts"
    headline = "mean task score"  # the tasks' headline figures averaged (accuracy, micro F1)
    routing_unit = "texts"
    short_title = "multi-task"
    routing_unrecorded = "per task"  # each task's part records its own routing
    overall_row = "mean task score"
    card = {
        "summary": "A multi-task text classifier: one output slice per task (its task_heads in "
                   "config.json), learnt from teachers that each answer some of the tasks,",
        "unit": "text and task", "labels": "Tasks and labels",
        "use": 'path, texts = "PATH/TO/THIS/FOLDER", ["your text here"]\n' + SNIPPET}

    def conflict_row(self, text, details, teachers) -> str:
        """A (text, task) pair: "[task] text", what it was decided, each teacher's answer."""
        said = " · ".join(f"{name}: {answer}" for name, answer in
                          zip(details["teachers"], details["answers"], strict=True))
        return f"{text} · decided {details['decided']} · {said}"

    def conflict_detail(self, details, teachers) -> list[tuple[str, str]]:
        lines = [(f"task {details['task']}: decided {details['decided']}; each teacher of the "
                  "task:", "bold")]
        for name, answer, score in zip(details["teachers"], details["answers"],
                                       details["confidence"], strict=True):
            lines += [(f"{name}: {answer}", "bold"), (f"   confidence {score:.3f}", "dim")]
        return lines


class MultiTaskJobs(JobBehaviour):
    """What the shared jobs may do with multi-task teachers."""

    unused_settings = {"class_weighting": "it applies to a project of single-label teachers, and "
                       "a multi-task project integrates each task apart"}
    labels_routing = "confidence"
    adaptive_passes = False  # each task settles on its own
    undeclared_refusal = ("is a kiwb multi-task model (task_heads in its config.json); add the "
                          "[[tasks]] it answers to kiwb.toml and name them in its entry with "
                          "tasks = [...]")
    # "mean" is VENUS' consensus: the teachers' logits (multi-label: probabilities) averaged.
    methods = MULTITASK_METHODS
    default_routing = "rank"  # a single-label task's; multi-label tasks compare per label
    merge_refusal = ("kiwb merge does not merge a multi-task project's teachers: each answers "
                     "its own tasks through its own head, and no head layout is shared to merge "
                     "row by row; distill them instead (kiwb train)")

    def conflict_labels(self, details, labels) -> list[str]:
        """A conflict answers one task: its labels only ("task/label")."""
        if not details or "task" not in details:
            return list(labels)
        return [label for label in labels if label.startswith(details["task"] + "/")]


# Several tasks per text, each a slice of one classifier's outputs.
KIND = TeacherKind("multi-task", MultiTaskCheckpoints(), MultiTaskWords(), MultiTaskJobs())
