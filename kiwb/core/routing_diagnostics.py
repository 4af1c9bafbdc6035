"""What a routing did, for people to read: where it split a teacher's confidences, and
how calibrated a teacher is on labeled texts of its own labels."""

from __future__ import annotations

import torch
from torch import Tensor


def routing_split(values: Tensor, routed_here: Tensor) -> float | None:
    """The threshold on a teacher's `values` that best separates the texts routed to it from
    the others (texts at or above it are "routed here"); None when all or none were routed."""
    if bool(routed_here.all()) or not bool(routed_here.any()):
        return None
    order = values.double().argsort()
    sorted_values, sorted_here = values.double()[order], routed_here[order].double()
    # Threshold before position k: rows < k count as "elsewhere", rows >= k as "here".
    elsewhere_below = torch.cat([torch.zeros(1, dtype=torch.float64),
                                 (1 - sorted_here).cumsum(0)])
    here_at_or_above = sorted_here.sum() - torch.cat([torch.zeros(1, dtype=torch.float64),
                                                      sorted_here.cumsum(0)])
    agreement = elsewhere_below + here_at_or_above  # (n + 1,)
    # Only split between distinct values.
    valid = torch.ones_like(agreement, dtype=torch.bool)
    valid[1:-1] = sorted_values[1:] > sorted_values[:-1]
    best = int(torch.where(valid, agreement, torch.full_like(agreement, -1.0)).argmax())
    if best == 0:
        return float(sorted_values[0])
    if best == len(sorted_values):
        return float(sorted_values[-1])
    return float((sorted_values[best - 1] + sorted_values[best]) / 2)


def expected_calibration_error(probs: Tensor, classes: Tensor, bins: int = 10) -> float:
    """ECE of (n, C) probabilities against the true `classes`: the gap between confidence and
    accuracy, averaged over equal-width confidence bins weighted by their share of texts."""
    if len(classes) == 0:
        raise ValueError("calibration error needs at least one labeled text")
    top, predicted = probs.double().max(dim=1)
    correct = (predicted == classes).double()
    which = (top * bins).long().clamp(max=bins - 1)
    error = 0.0
    for number in range(bins):
        members = which == number
        if bool(members.any()):
            error += members.double().mean().item() * abs(top[members].mean().item()
                                                          - correct[members].mean().item())
    return error
