"""The learning check of a multi-label student: a label the targets give often that the
student never predicts is flagged (its classes are not exclusive, so the single-label check's
confusion matrix and class shares do not apply; kiwb.core.learning_check's verdicts do)."""

from __future__ import annotations

from collections.abc import Sequence

from kiwb.core.learning_check import COLLAPSED, OK, STUDENT_HINT, LearningCheck
from kiwb.core.target_fit import AMBIGUITY, THRESHOLD

# A label the targets decidedly say yes to (kiwb.core.target_fit.decisive_yes) on at least
# this share of the taught texts is one the student must predict somewhere; rarer labels may
# fairly go unpredicted on a small sample.
TARGET_RATE_FLOOR = 0.02
# The kind's untrained reference (kiwb.kinds.multilabel.summary's ENSEMBLE), as the learning
# check and the training log name it.
OWNERS_MEAN = "the owners' mean"


def check_label_rates(labels: Sequence[str], predicted_counts: Sequence[int], texts: int | None,
                      target_rates: Sequence[float], where: str,
                      hint: str = STUDENT_HINT) -> LearningCheck:
    """Collapsed labels: a target rate >= TARGET_RATE_FLOOR and no text of `texts` (None: the
    sample checked) predicted."""
    never = [label for label, count, rate in zip(labels, predicted_counts, target_rates, strict=True)
             if not count and rate >= TARGET_RATE_FLOOR]
    if not never:
        return LearningCheck(OK)
    rates = ", ".join(f"{label} {100 * target_rates[list(labels).index(label)]:.0f}%"
                      for label in never[:6])
    return LearningCheck(COLLAPSED, tuple(never),
                         f"never predicts {', '.join(never[:6])} on "
                         f"{'the' if texts is None else f'{texts:,}'} {where} (the "
                         f"targets say yes, at {THRESHOLD + AMBIGUITY:g} or more, to {rates} of the "
                         "texts)", hint)
