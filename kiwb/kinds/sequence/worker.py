"""The sequence kind's runtime (kiwb.kinds.runtime.KindRuntime): its texts are scored, read,
integrated (integration.py), trained (training.py, student.py), evaluated and asked by the
shared classifier code paths that the other kinds build on."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.kinds.runtime import RuntimeDefaults
from kiwb.kinds.sequence import KIND
from kiwb.kinds.sequence.integration import integrate_texts
from kiwb.kinds.sequence.student import evaluate_classifier, predicted_labels
from kiwb.kinds.sequence.training import prepare_texts
from kiwb.workers.data import TextTable, load_table
from kiwb.workers.shard_scoring import ScoringSettings, score_texts


def score_task_rows(task, model, tokenizer, rows: range, settings: ScoringSettings,
                    device: torch.device, **options) -> dict[str, np.ndarray]:
    """The score arrays of the task's texts at `rows`."""
    return score_texts(model, tokenizer, task.table.texts[rows.start:rows.stop], settings,
                       device, **options)


def load_role_table(path: str, spec, role: str, config=None) -> TextTable:
    """A data set of the project, by its [data.ROLE] `spec`."""
    return load_table(path, text_column=spec.text_column, label_column=spec.label_column,
                      split=spec.split, limit=spec.limit, role=role, subset=spec.subset)


class SequenceRuntime(RuntimeDefaults):
    kind = KIND
    score_shard = staticmethod(score_task_rows)
    load_table = staticmethod(load_role_table)
    integrate = staticmethod(integrate_texts)
    prepare_training = staticmethod(prepare_texts)
    evaluate = staticmethod(evaluate_classifier)
    predict = staticmethod(predicted_labels)
