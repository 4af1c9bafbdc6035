"""SimME's relational loss: the student's pairwise cosine similarities matched to each
teacher's, pair by pair, weighted per (pair, teacher) (thesis ch. 2, eq. 3-4).

    J = 1/P * sum over pairs i<j, teachers t of  w_t(i, j) * (cos_s(i, j) - cos_t(i, j))^2

P is the number of pairs in the batch (the thesis' 1/n). The weights say how far each teacher
is trusted on each pair:

  equal    every teacher on every pair (w = 1): plain multi-teacher relational distillation
  maskout  a teacher only on pairs of two texts it covers (eq. 4): w = cover_i * cover_j
  mc       maskout, with each pair's weight shared among its covering teachers by how stable
           both texts stayed under each teacher's dropout (its MC reliability)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.nn import functional

from kiwb.core.choices import PAIR_WEIGHTINGS


def cosine_matrix(embeddings: Tensor) -> Tensor:
    """Pairwise cosine similarities of a batch's embeddings: (n, d) -> (n, n)."""
    unit = functional.normalize(embeddings.float(), dim=-1)
    return unit @ unit.T


def pair_weights(weighting: str, coverage: Tensor, reliability: Tensor | None = None) -> Tensor:
    """Each teacher's weight on each pair of a batch, (T, n, n), from which texts each teacher
    covers, (T, n) of 0/1, and (mc) each text's reliability under each teacher, (T, n) in [0, 1].

    mc keeps maskout's total per pair (the number of teachers covering both texts) and shares
    it by the geometric mean of the two texts' reliabilities, so a pair's weight moves between
    teachers without the loss's scale moving with the batch's reliabilities. A pair no
    covering teacher is reliable on is shared evenly among them."""
    if weighting not in PAIR_WEIGHTINGS:
        raise ValueError(f"unknown pair weighting {weighting!r}; choose one of "
                         f"{', '.join(PAIR_WEIGHTINGS)}")
    coverage = coverage.float()
    if weighting == "equal":
        return torch.ones(coverage.shape[0], coverage.shape[1], coverage.shape[1])
    covered = coverage[:, :, None] * coverage[:, None, :]  # (T, n, 1) * (T, 1, n) -> (T, n, n)
    if weighting == "maskout":
        return covered
    if reliability is None:
        raise ValueError("the mc pair weighting needs each text's reliability per teacher")
    both = (reliability.float()[:, :, None] * reliability.float()[:, None, :]).sqrt() * covered
    shares = torch.where(both.sum(0, keepdim=True) > 0, both, covered)  # none reliable: even
    total = shares.sum(0, keepdim=True)
    return torch.where(total > 0, covered.sum(0, keepdim=True) * shares / total.clamp_min(1e-12),
                       torch.zeros_like(shares))


def relational_loss(student: Tensor, teacher_cosines: Tensor, weights: Tensor) -> Tensor:
    """J above for one batch: the student's embeddings (n, d), each teacher's cosine matrix of
    the same texts (T, n, n) and the pair weights (T, n, n); a batch of one text has no pair."""
    count = student.shape[0]
    if count < 2:
        return student.sum() * 0.0
    upper = torch.triu(torch.ones(count, count, dtype=torch.bool, device=student.device), 1)
    gap = (cosine_matrix(student)[None] - teacher_cosines) ** 2  # (1, n, n) - (T, n, n)
    return (weights.to(gap) * gap)[:, upper].sum() / upper.sum()


def teacher_cosines(embeddings: Sequence[Tensor]) -> Tensor:
    """Each teacher's cosine matrix of one batch, (T, n, n), from its embeddings (n, d_t):
    the teachers' widths may differ, their similarities do not."""
    return torch.stack([cosine_matrix(teacher) for teacher in embeddings])


def direct_loss(projected: Sequence[Tensor], targets: Sequence[Tensor], coverage: Tensor) -> Tensor:
    """The optional direct term: the student's embedding projected into each teacher's space
    (n, d_t) against the teacher's own (n, d_t), squared error per dimension, over the
    (text, teacher) pairs the teacher covers (EmbedDistillLoss, with maskout)."""
    errors = torch.stack([((guess.float() - target.float()) ** 2).mean(-1)
                          for guess, target in zip(projected, targets, strict=True)])  # (T, n)
    covered = coverage.float().to(errors)
    return (errors * covered).sum() / covered.sum().clamp_min(1.0)
