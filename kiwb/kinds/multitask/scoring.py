"""Scoring one shard with one teacher of a multi-task project: per head, the arrays its task's
kind stores (a softmax head's as a single-label teacher's, a sigmoid head's as a multi-label
teacher's), named "<task>/<array>"; and the teacher's pooled feature (the mean of its last
hidden states over the text's tokens, dropout off), which the student's feature loss matches.

The K passes run once for all of a teacher's heads: one teacher, one set of forward passes.
"""

from __future__ import annotations

import numpy as np
import torch

from kiwb.kinds.multilabel.scoring import label_batch_scores
from kiwb.workers.representation import RepresentationCapture
from kiwb.workers.shard_scoring import ScoringSettings, _batch_scores, score_texts

FEATURES = "features"  # (n, hidden) the teacher's pooled last hidden state
BATCH_SCORES = {"single-label": _batch_scores, "multi-label": label_batch_scores}


def score_task_rows(task, model, tokenizer, rows: range, settings: ScoringSettings,
                    device: torch.device, **options) -> dict[str, np.ndarray]:
    """The multi-task kind's score_shard: every head's score arrays and the pooled features."""
    heads = task.teacher.heads

    with RepresentationCapture(model, "mean") as capture:
        def batch_scores(det_logits, pass_logits, keep_passes=False) -> dict[str, np.ndarray]:
            arrays = {FEATURES: capture.take().cpu().numpy()}
            for head in heads:
                found = BATCH_SCORES[head.kind](det_logits[..., head.start:head.stop],
                                                pass_logits[..., head.start:head.stop])
                arrays.update({f"{head.task}/{name}": values for name, values in found.items()})
            return arrays

        return score_texts(model, tokenizer, task.table.texts[rows.start:rows.stop], settings,
                           device, batch_scores=batch_scores, **options)
