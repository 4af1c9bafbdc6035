"""The multi-label kind: sigmoid classifiers with partly shared labels (ANT, thesis ch. 4).

What it has so far: the kind's description (MULTI_LABEL below: how a checkpoint is recognised
and read, the methods it takes), per-label uncertainty (uncertainty.py), scoring (scoring.py),
data with a list of labels per text (data.py), the per-label integrators (integration.py), the
label-dependency transfer (transfer.py), a data set's scores on the union and its conflicts
(pool.py), the student's losses, thresholds and head (losses.py, thresholds.py, student.py)
and the metrics (metrics.py). It joins kiwb.kinds.KINDS once its integration, training,
evaluation and prediction seams are wired to the store and the jobs (issue 27); until then
kiwb refuses multi-label teachers in one line (kiwb.kinds.unmatched_checkpoint).
"""

from __future__ import annotations

from collections.abc import Sequence

from kiwb.core.choices import MULTILABEL_METHODS
from kiwb.kinds.base import TeacherKind, TeacherKnowledge
from kiwb.kinds.sequence import read_label_names


class MultiLabelKind(TeacherKind):
    """Any number of labels per text, from a sigmoid *ForSequenceClassification head."""

    name = "multi-label"
    title = "multi-label text classification"
    architecture_suffix = "ForSequenceClassification"
    auto_model = "AutoModelForSequenceClassification"
    pipeline_tag = "text-classification"
    unit = "text and label"  # a conflict: owners of a shared label disagree on a text
    units = "text-label pairs"
    headline = "micro F1"
    routing_unit = "shared labels"
    labels_routing = "confidence"
    short_title = "multi-label"
    problem_type = "multi_label_classification"
    adaptive_passes = False  # its routing settles per label, not per text
    methods = MULTILABEL_METHODS
    seams = {
        "score_shard": "kiwb.kinds.multilabel.scoring:score_task_rows",
        "load_table": "kiwb.kinds.multilabel.data:load_role_table",
    }

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


MULTI_LABEL = MultiLabelKind()
