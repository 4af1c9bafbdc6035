"""Classification metrics against figures worked out by hand."""

from __future__ import annotations

import pytest
import torch

from kiwb.core.metrics import classification_report, confusion_matrix, macro_f1, per_class_accuracy

# true:      a a a b b c
# predicted: a a b b c c
# confusion (rows true, columns predicted): a [2 1 0], b [0 1 1], c [0 0 1]
# accuracy 4/6; per-class a 2/3, b 1/2, c 1/1
# F1 = 2·tp / (predicted + actual): a 4/5, b 2/4, c 2/3; macro (4/5 + 1/2 + 2/3) / 3 = 59/90
THREE_LABELS = ([0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 2], ["a", "b", "c"])

CASES = {
    "three labels": (
        *THREE_LABELS,
        [[2, 1, 0], [0, 1, 1], [0, 0, 1]], 4 / 6, [2 / 3, 1 / 2, 1.0], 59 / 90,
    ),
    # A label never true nor predicted is left out of the macro mean; per-class it is None.
    "an absent label": (
        [0, 1, 1], [0, 1, 0], ["a", "b", "c"],
        [[1, 1, 0], [0, 1, 0], [0, 0, 0]], 2 / 3, [1 / 2, 1.0, None], (2 / 3 + 2 / 3) / 2,
    ),
    # A label only ever predicted has no per-class accuracy but counts in macro-F1 with F1 = 0.
    "a label only predicted": (
        [0, 1], [0, 0], ["a", "b"],
        [[1, 1], [0, 0]], 1 / 2, [1 / 2, None], (2 / 3 + 0.0) / 2,
    ),
    "all right": (
        [1, 0, 1], [1, 0, 1], ["a", "b"],
        [[1, 0], [0, 2]], 1.0, [1.0, 1.0], 1.0,
    ),
    "all wrong": (
        [1, 0], [0, 1], ["a", "b"],
        [[0, 1], [1, 0]], 0.0, [0.0, 0.0], 0.0,
    ),
}


@pytest.mark.parametrize(("predicted", "true", "labels", "confusion", "accuracy", "per_class", "f1"),
                         list(CASES.values()), ids=list(CASES))
def test_metrics_match_hand_computed_figures(predicted, true, labels, confusion, accuracy, per_class, f1):
    predicted, true = torch.tensor(predicted), torch.tensor(true)
    counts = confusion_matrix(predicted, true, len(labels))
    assert counts.tolist() == confusion
    assert per_class_accuracy(counts) == pytest.approx(per_class)
    assert macro_f1(counts) == pytest.approx(f1)

    report = classification_report(predicted, true, labels)
    assert report["accuracy"] == pytest.approx(accuracy)
    assert report["macro_f1"] == pytest.approx(f1)
    assert report["per_class_accuracy"] == pytest.approx(dict(zip(labels, per_class, strict=True)))
    assert report["confusion"] == confusion
    assert report["num_texts"] == len(true)


def test_macro_f1_of_no_counts_is_zero():
    assert macro_f1(torch.zeros(3, 3, dtype=torch.long)) == 0.0
