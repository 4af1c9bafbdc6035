"""VENUS' consensus on a task several teachers answer: the mean of their logits.

VENUS' public code keeps a running 0.5 * (old + new) over the teachers, which gives the last of
three teachers half the say and the first a quarter; this is the plain mean. With teachers of
different label sets, each union label's logit is the mean over the teachers that have it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def mean_logit_targets(det_logits: Sequence[Tensor], positions: Sequence[Tensor],
                       num_union: int) -> Tensor:
    """(n, |Y|) softmax of the teachers' logits averaged per union label (over the teachers
    that have the label), from each teacher's (n, C_i) logits and its labels' union slots."""
    total = torch.zeros(det_logits[0].shape[0], num_union)
    count = torch.zeros(num_union)
    for logits, slots in zip(det_logits, positions, strict=True):
        total[:, slots] += logits.float()
        count[slots] += 1
    known = count > 0
    mean = torch.full_like(total, -torch.inf)
    mean[:, known] = total[:, known] / count[known]
    return mean.softmax(-1)
