"""The multi-label kind: sigmoid classifiers with partly shared labels (ANT, thesis ch. 4).

KIND below describes it: how a checkpoint is recognised (problem_type
multi_label_classification) and read, the methods it takes. Its worker side: per-label
uncertainty (uncertainty.py), scoring (scoring.py), data with a list of labels per text
(data.py), the per-label integrators (integration.py), the label-dependency transfer
(transfer.py), a data set's scores on the union and its conflicts (pool.py), the pool's
integration and the given labels (stored_pool.py), its record (summary.py, integrate_job.py), the
student's losses, thresholds, learning check and head (losses.py, thresholds.py, check.py,
student.py), training (training.py) and the metrics (metrics.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from kiwb.core.choices import MULTILABEL_METHODS
from kiwb.kinds.base import (
    CheckpointReading,
    JobBehaviour,
    ResultWording,
    TeacherKind,
    TeacherKnowledge,
)
from kiwb.kinds.sequence import read_label_names


class MultiLabelCheckpoints(CheckpointReading):
    """How multi-label checkpoints are recognised and read."""

    architecture_suffix = "ForSequenceClassification"
    auto_model = "AutoModelForSequenceClassification"
    pipeline_tag = "text-classification"
    problem_type = "multi_label_classification"

    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        """Its labels (one is enough: each label is its own yes or no), renamed by `override`."""
        if not outputs:
            raise ValueError("has no outputs; a multi-label teacher needs one label or more")
        labels = read_label_names(outputs, override)
        return TeacherKnowledge(outputs=labels, classes=labels)

    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        """Every label once, in teacher then label order; a shared label is one output."""
        return list(dict.fromkeys(label for labels in classes for label in labels))


class MultiLabelWords(ResultWording):
    """How tables, logs, the workbench and the card speak of multi-label teachers."""

    title = "multi-label text classification"
    unit = "text and label"  # a conflict: owners of a shared label disagree on a text
    units = "text-label pairs"
    headline = "micro F1"
    routing_unit = "shared labels"
    short_title = "multi-label"
    card = {
        "summary": "A multi-label text classifier (a yes or no per label) over the union of its "
                   "teachers' label sets,",
        "unit": "text and label", "labels": "Labels",
        "pipeline": 'classify = pipeline("text-classification", model="PATH/TO/THIS/FOLDER", '
                    'top_k=None, function_to_apply="sigmoid")',
        "call": 'print(classify("your text here"))  # a label is said over its threshold'}

    def conflict_row(self, text, details, teachers) -> str:
        """A (text, label) pair: "[label] text", what it was decided, each owner's answer."""
        return f"{text} · decided {details['decided']} · {_owners_said(details)}"

    def conflict_detail(self, details, teachers) -> list[tuple[str, str]]:
        """Each owner of the label: its probability, its confidence (MC and plain)."""
        lines = [(f"{details['label']}: decided {details['decided']} (target "
                  f"{details['target']:.3f}); each owner of the label:", "bold")]
        for number, name in enumerate(details["owners"]):
            lines += [(f"{name}: {_answer(details['probs'][number])}", "bold"),
                      (f"   probability {details['probs'][number]:.3f} · confidence MC "
                       f"{details['mc'][number]:.3f}, plain {details['plain'][number]:.3f}",
                       "dim")]
        return lines


class MultiLabelJobs(JobBehaviour):
    """What the shared jobs may do with multi-label teachers."""

    labels_routing = "confidence"
    default_routing = "confidence"  # per label; the other routings read one class per text
    unused_settings = {"class_weighting": "it re-weights one class per text, and a multi-label "
                       "text has a yes or no per label"}
    adaptive_passes = False  # its routing settles per label, not per text
    methods = MULTILABEL_METHODS


def _answer(probability: float) -> str:
    return "yes" if probability > 0.5 else "no"


def _owners_said(details) -> str:
    """`a: yes 0.95 (MC 0.50) · b: no 0.50 (MC 0.50)`."""
    return " · ".join(f"{name}: {_answer(prob)} {prob:.2f} (MC {mc:.2f})" for name, prob, mc in
                      zip(details["owners"], details["probs"], details["mc"], strict=True))


# Any number of labels per text, from a sigmoid *ForSequenceClassification head.
KIND = TeacherKind("multi-label", MultiLabelCheckpoints(), MultiLabelWords(), MultiLabelJobs())
