"""The sequence kind: single-label text classifiers (MUKI as published)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kiwb.core.choices import AUTO_ROUTING
from kiwb.kinds.base import (
    CheckpointReading,
    JobBehaviour,
    ResultWording,
    TeacherKind,
    TeacherKnowledge,
)

_GENERIC_LABEL = re.compile(r"^LABEL_\d+$")


def read_label_names(outputs: Sequence[str], override: Sequence[str] | None) -> tuple[str, ...]:
    """A classifier's label names in id order: its id2label, or kiwb.toml's labels override;
    ValueError with one line for a count that does not match, generic or repeated names."""
    count = len(outputs)
    if override is not None:
        labels = tuple(override)
        if len(labels) != count:
            raise ValueError(f"labels override lists {len(labels)} names but the "
                             f"checkpoint has {count} outputs; list exactly {count}")
    else:
        labels = tuple(str(label) for label in outputs)
        generic = [label for label in labels if _GENERIC_LABEL.match(label)]
        if generic:
            raise ValueError(f"names its labels generically ({', '.join(generic)}); give "
                             "the real names with labels = [...] in its [[teachers]] entry")
    if len(set(labels)) != len(labels):
        raise ValueError(f"repeats label names {labels}; make them unique")
    return labels


class SequenceCheckpoints(CheckpointReading):
    """How single-label checkpoints are recognised and read."""

    architecture_suffix = "ForSequenceClassification"
    auto_model = "AutoModelForSequenceClassification"
    pipeline_tag = "text-classification"
    # A sigmoid head (problem_type multi_label_classification) answers each label alone:
    # its outputs are no distribution over labels, so it is not this kind's teacher.
    not_problem_types = ("multi_label_classification", "regression")

    def matches(self, architectures: Sequence[str], problem_type: str | None = None) -> str | None:
        if problem_type in self.not_problem_types:
            return None
        return super().matches(architectures, problem_type)

    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        count = len(outputs)
        if count < 2:  # before the label names, whose fixes cannot help a one-output model
            raise ValueError(f"has only {count} label; a teacher needs two or more (its "
                             "confidence is undefined with one): use a classifier of 2+ labels")
        labels = read_label_names(outputs, override)
        return TeacherKnowledge(outputs=labels, classes=labels)

    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        # dict keeps insertion order, so the union is deterministic and reproducible.
        return list(dict.fromkeys(label for labels in classes for label in labels))


class SequenceWords(ResultWording):
    """How tables, logs, the workbench and the card speak of single-label teachers."""

    title = "single-label text classification"
    unit = "text"
    units = "texts"
    headline = "accuracy"
    routing_unit = "texts"
    card = {
        "summary": "A text classifier over the union of its teachers' label sets,",
        "unit": "text", "labels": "Labels",
        "pipeline": 'classify = pipeline("text-classification", model="PATH/TO/THIS/FOLDER")',
        "call": 'print(classify("your text here"))'}


class SequenceJobs(JobBehaviour):
    """What the shared jobs may do with single-label teachers."""

    keeps_representation = True
    # Chosen per project from the scores (kiwb.kinds.sequence.routing_choice): no routing won on
    # every set measured (BENCHMARKS.md, "Choosing the routing").
    default_routing = AUTO_ROUTING
    labels_routing = "stacked"  # it held on labels taken from the conflicts list (BENCHMARKS.md)


# One label per text, from a *ForSequenceClassification head.
KIND = TeacherKind("sequence", SequenceCheckpoints(), SequenceWords(), SequenceJobs())
