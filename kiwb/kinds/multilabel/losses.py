"""A multi-label student's losses: each label is its own yes or no (binary cross-entropy), so
a text's labels do not compete for one unit of probability as a softmax's would."""

from __future__ import annotations

import torch
from torch import Tensor


def weighted_bce_loss(method: str, student_logits: Tensor, targets: Tensor,
                      weights: Tensor | None, coverage: Tensor | None = None) -> Tensor:
    """Mean over (text, label) of w * BCE(sigmoid(logit), target) against (n, L) integrated
    probabilities; `weights` (n, L) are MUKI's per-label margins (ones for the baselines).
    `method` and `coverage` are the softmax loss's arguments, unused: every method's targets
    here are one probability per label."""
    per_label = torch.nn.functional.binary_cross_entropy_with_logits(
        student_logits, targets.to(student_logits.dtype), reduction="none")
    return (per_label if weights is None else weights * per_label).mean()


def gold_bce_loss(student_logits: Tensor, gold: Tensor) -> Tensor:
    """The supervised run's loss: mean BCE against (n, L) 0/1 gold labels."""
    return torch.nn.functional.binary_cross_entropy_with_logits(
        student_logits, gold.to(student_logits.dtype))


def prior_log_odds(targets: Tensor, weights: Tensor | None = None, floor: float = 1e-3) -> Tensor:
    """Per label, the log-odds of the (weighted) mean target: the bias at which a head that
    sees no text already minimises the weighted BCE. A student whose head starts there spends
    its first steps on the texts, not on learning how often each label is yes; from a bias of 0
    the first steps only push every label towards no, and under the warm-up and linear decay
    the students of the multi-label demo never left that plateau (micro F1 0 at 0.5). Means
    are kept within [floor, 1 - floor]: a label no text says yes to still gets a finite bias."""
    targets = targets.float()
    if weights is None:
        mean = targets.mean(0)
    else:
        weights = weights.float()
        mean = (weights * targets).sum(0) / weights.sum(0).clamp(min=torch.finfo(torch.float32).tiny)
    mean = mean.clamp(floor, 1 - floor)
    return torch.log(mean / (1 - mean))
