"""Classification metrics over the union label set, from predicted and true label ids."""

from __future__ import annotations

import torch
from torch import Tensor


def confusion_matrix(predicted: Tensor, true: Tensor, num_labels: int) -> Tensor:
    """Counts (num_labels, num_labels): row = true label, column = predicted label."""
    flat = true * num_labels + predicted  # one bin per (true, predicted) pair
    return torch.bincount(flat, minlength=num_labels * num_labels).view(num_labels, num_labels)


def per_class_accuracy(confusion: Tensor) -> list[float | None]:
    """Recall of each true label (None for a label with no examples)."""
    totals = confusion.sum(1)
    return [
        None if int(total) == 0 else float(confusion[i, i]) / float(total)
        for i, total in enumerate(totals)
    ]


def macro_f1(confusion: Tensor) -> float:
    """Unweighted mean F1 over the labels that occur (as truth or prediction)."""
    true_positive = confusion.diag().double()
    predicted = confusion.sum(0).double()
    actual = confusion.sum(1).double()
    present = (predicted + actual) > 0
    f1 = 2 * true_positive / (predicted + actual).clamp(min=1)
    return float(f1[present].mean()) if bool(present.any()) else 0.0


def classification_report(predicted: Tensor, true: Tensor, labels: list[str]) -> dict:
    """Accuracy, macro-F1, per-class accuracy and the confusion matrix, as plain numbers."""
    confusion = confusion_matrix(predicted, true, len(labels))
    return {
        "accuracy": float((predicted == true).double().mean()),
        "macro_f1": macro_f1(confusion),
        "per_class_accuracy": dict(zip(labels, per_class_accuracy(confusion), strict=True)),
        "confusion": confusion.tolist(),
        "num_texts": int(true.numel()),
    }
