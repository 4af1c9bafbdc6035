"""Scoring one shard of texts with one multi-label teacher: per text and label.

Texts are read, batched and passed through the teacher exactly as for single-label teachers
(kiwb.workers.shard_scoring); only what a batch's logits become differs: each label's sigmoid,
not a softmax over labels, and each label's own uncertainty.
"""

from __future__ import annotations

import numpy as np
import torch

from kiwb.kinds.multilabel.uncertainty import (
    binary_entropy,
    label_mutual_information,
    mc_label_confidence,
    plain_label_confidence,
)
from kiwb.workers.shard_scoring import ScoringSettings, arrays_to_host, score_texts


def label_batch_scores(det_logits: torch.Tensor, pass_logits: torch.Tensor,
                       keep_passes: bool = False) -> dict[str, np.ndarray]:
    """A batch's (n, L) arrays from det (n, L) and pass (K, n, L) logits: probabilities with
    dropout off and averaged over the passes, entropies, confidences, mutual information."""
    det_logits = det_logits.float()  # the statistics in float32, whatever autocast computed in
    det_probs = det_logits.sigmoid()
    pass_probs = pass_logits.float().sigmoid()  # (K, n, L)
    mc_probs = pass_probs.mean(0)
    arrays = {
        "det_logits": det_logits,
        "det_probs": det_probs,
        "mc_probs": mc_probs,
        "det_entropy": binary_entropy(det_probs),
        "mc_entropy": binary_entropy(mc_probs),
        "det_confidence": plain_label_confidence(det_probs),
        "mc_confidence": mc_label_confidence(pass_probs),
        "mutual_information": label_mutual_information(pass_probs),
    }
    if keep_passes:
        arrays["pass_probs"] = pass_probs.transpose(0, 1)  # (n, K, L)
    return arrays_to_host(arrays)


def score_task_rows(task, model, tokenizer, rows: range, settings: ScoringSettings,
                    device: torch.device, **options) -> dict[str, np.ndarray]:
    """The multi-label kind's score_shard: the (n, L) score arrays of the texts at `rows`."""
    return score_texts(model, tokenizer, task.table.texts[rows.start:rows.stop], settings,
                       device, batch_scores=label_batch_scores, **options)
