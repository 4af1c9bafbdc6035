"""Distillation losses for the student over the union label set."""

from __future__ import annotations

import torch
from torch import Tensor


def _kl_rows(targets: Tensor, log_probs: Tensor) -> Tensor:
    """KL(target || student) over the last dimension, shape (...,)."""
    # Zero-target entries contribute nothing, even where the student's log-prob is -inf.
    cross = targets * log_probs.masked_fill(targets == 0, 0.0)
    return (torch.special.xlogy(targets, targets) - cross).sum(dim=-1)


def _weighted_mean(per_text: Tensor, weights: Tensor | None) -> Tensor:
    """Batch mean of per-text losses, each scaled by its instance weight when given."""
    if weights is None:
        return per_text.mean()
    return (weights * per_text).mean()


def weighted_kl_loss(
    student_logits: Tensor, targets: Tensor, weights: Tensor | None = None
) -> Tensor:
    """Batch mean of v(x) * KL(target || softmax(student)) over (n, |Y|) inputs."""
    log_probs = torch.log_softmax(student_logits, dim=-1)
    return _weighted_mean(_kl_rows(targets, log_probs), weights)


def softmax_distillation_loss(method: str, student_logits: Tensor, targets: Tensor,
                              weights: Tensor | None, coverage: Tensor) -> Tensor:
    """A softmax student's loss against its integrated targets: UHC's per-teacher slices for
    `uhc` (coverage (N, |Y|): which union labels each teacher has), else the weighted KL."""
    if method == "uhc":
        return uhc_loss(student_logits, targets, coverage.to(student_logits.device), weights)
    return weighted_kl_loss(student_logits, targets, weights)


def uhc_loss(
    student_logits: Tensor,
    teacher_targets: Tensor,
    coverage: Tensor,
    weights: Tensor | None = None,
) -> Tensor:
    """UHC loss: each teacher's renormalised student slice vs that teacher, summed, batch mean."""
    # (n, |Y|) -> (n, 1, |Y|) -> (n, N, |Y|): one copy of the logits per teacher.
    sliced = student_logits.unsqueeze(1).masked_fill(~coverage.unsqueeze(0), float("-inf"))
    # Softmax over covered labels only renormalises the student within teacher i's label set.
    log_probs = torch.log_softmax(sliced, dim=-1)
    per_text = _kl_rows(teacher_targets, log_probs).sum(dim=1)  # (n, N) -> (n,)
    return _weighted_mean(per_text, weights)
