"""A multi-task student's losses: each task's head against that task's targets, by the task's
kind (KL against a softmax target for a single-label task, BCE per label for a multi-label
one), summed over the tasks; and VENUS' feature loss.

The student's training outputs are laid end to end: its task outputs (one slice per task), then
per teacher its adapter's prediction of that teacher's pooled feature. Targets and weights are
laid out the same way, so the shared Trainer hands them over as it does any kind's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from kiwb.core.losses import weighted_kl_loss
from kiwb.kinds.multilabel.losses import weighted_bce_loss
from kiwb.kinds.multitask.heads import Head


def task_losses(heads: Sequence[Head], logits: Tensor, targets: Tensor,
                weights: Tensor) -> dict[str, Tensor]:
    """Each task's loss on its slice: a single-label task's weighted KL (its texts' weights are
    repeated over its slice; the first column is read), a multi-label task's weighted BCE."""
    found = {}
    for head in heads:
        columns = slice(head.start, head.stop)
        if head.kind == "single-label":
            found[head.task] = weighted_kl_loss(logits[:, columns], targets[:, columns],
                                                weights[:, head.start])
        else:
            found[head.task] = weighted_bce_loss("", logits[:, columns], targets[:, columns],
                                                 weights[:, columns])
    return found


def feature_loss(predicted: Sequence[Tensor], features: Sequence[Tensor]) -> Tensor:
    """VENUS' feature loss: the mean over teachers of the mean squared error between the
    adapter's prediction of a teacher's (standardised) pooled feature and that feature."""
    errors = [torch.nn.functional.mse_loss(guess, feature.to(guess.dtype))
              for guess, feature in zip(predicted, features, strict=True)]
    return torch.stack(errors).mean()


def split_features(values: Tensor, start: int, widths: Sequence[int]) -> list[Tensor]:
    """The per-teacher feature columns of a laid-out (n, outputs + sum(widths)) tensor."""
    return list(values[:, start:].split(list(widths), dim=1))


def gold_task_losses(heads: Sequence[Head], logits: Tensor, gold: Tensor) -> Tensor:
    """The supervised run's loss: per task, cross-entropy against the gold label (one-hot in
    its slice) or BCE against the gold labels (0/1), summed over tasks."""
    total = logits.new_zeros(())
    for head in heads:
        columns = slice(head.start, head.stop)
        if head.kind == "single-label":
            total = total + torch.nn.functional.cross_entropy(logits[:, columns],
                                                              gold[:, columns].argmax(-1))
        else:
            total = total + torch.nn.functional.binary_cross_entropy_with_logits(
                logits[:, columns], gold[:, columns].to(logits.dtype))
    return total
