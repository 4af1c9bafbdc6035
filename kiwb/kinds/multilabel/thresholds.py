"""Decision thresholds of a multi-label student: 0.5, or per label, tuned on labeled dev texts.

A label's best threshold is the one of CANDIDATES with the highest F1 of that label on the dev
texts; ties go to the one nearest 0.5, and a label with no dev text keeps 0.5 (nothing says
otherwise). The thresholds are recorded with the run and in the model card.
"""

from __future__ import annotations

import torch
from torch import Tensor

DEFAULT_THRESHOLD = 0.5
CANDIDATES = tuple(round(0.05 * step, 2) for step in range(1, 20))  # 0.05 ... 0.95


def decide(probs: Tensor, thresholds: Tensor | float = DEFAULT_THRESHOLD) -> Tensor:
    """(n, L) 0/1 decisions: a label is predicted where its probability exceeds its threshold."""
    return (probs > thresholds).long()


def tune_thresholds(probs: Tensor, gold: Tensor) -> Tensor:
    """(L,) thresholds maximising each label's F1 on (n, L) dev probabilities and 0/1 gold."""
    gold = gold.bool()
    candidates = torch.tensor(CANDIDATES, dtype=probs.dtype)  # (G,)
    predicted = probs[None] > candidates[:, None, None]  # (G, n, L)
    true_positive = (predicted & gold[None]).sum(1).double()  # (G, L)
    denominator = predicted.sum(1).double() + gold.sum(0).double()[None]
    f1 = torch.where(denominator > 0, 2 * true_positive / denominator.clamp_min(1), 0.0)
    # Highest F1, then nearest 0.5: rank candidates by distance and take the first best.
    order = (candidates - DEFAULT_THRESHOLD).abs().argsort(stable=True)
    best = f1[order].argmax(0)  # (L,): first maximum in nearness order
    thresholds = candidates[order][best]
    return torch.where(gold.any(0), thresholds, torch.full_like(thresholds, DEFAULT_THRESHOLD))
