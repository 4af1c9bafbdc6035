"""Multi-label metrics (ANT's): micro and macro F1, F1 per label, Hamming loss, subset accuracy.

A label with no gold positive and no predicted positive has F1 0 in the macro mean, as
scikit-learn counts it (zero_division=0), so kiwb's figures compare with the usual tables.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _f1(true_positive: Tensor, predicted: Tensor, gold: Tensor) -> Tensor:
    denominator = predicted + gold
    return torch.where(denominator > 0, 2.0 * true_positive / denominator.clamp_min(1),
                       torch.zeros_like(denominator, dtype=torch.float64))


def multilabel_report(gold: Tensor, predicted: Tensor, labels: list[str]) -> dict:
    """Figures of (n, L) 0/1 predictions against (n, L) 0/1 gold."""
    if gold.shape != predicted.shape or gold.shape[1] != len(labels):
        raise ValueError(f"gold {tuple(gold.shape)}, predictions {tuple(predicted.shape)} and "
                         f"{len(labels)} labels do not agree")
    gold, predicted = gold.bool(), predicted.bool()
    true_positive = (gold & predicted).sum(0).double()
    predicted_count, gold_count = predicted.sum(0).double(), gold.sum(0).double()
    per_label = _f1(true_positive, predicted_count, gold_count)
    micro = _f1(true_positive.sum(), predicted_count.sum(), gold_count.sum())
    rows = gold.shape[0]
    return {
        "micro_f1": float(micro),
        "macro_f1": float(per_label.mean()) if labels else 0.0,
        "per_label_f1": {label: float(f1) for label, f1 in zip(labels, per_label, strict=True)},
        "hamming_loss": float((gold ^ predicted).double().mean()) if rows else 0.0,
        "subset_accuracy": float((gold == predicted).all(1).double().mean()) if rows else 0.0,
        "support": {label: int(count) for label, count in zip(labels, gold_count, strict=True)},
    }
