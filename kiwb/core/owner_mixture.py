"""One mixture over all teachers: each pool text belongs to the labels of one teacher.

Fitting a mixture per teacher asks each teacher alone to split the pool into "mine" and
"not mine", and a teacher whose scores are bimodal for another reason (short texts, a
confusing class) splits it along that. Here the split is shared: a latent owner z picks one
teacher per text, and teacher i's features follow an "inside" Gaussian when z = i and an
"outside" one otherwise. So a text that teacher B claims strongly is, for that reason, less
likely teacher A's, and EM fits every teacher's inside/outside shapes and the teachers' shares
of the pool together. The posterior P(z = i | all features) estimates P(label in Y_i | x)
(the paper's eq. 3) for disjoint label sets that cover the pool. A text of a label that
several teachers share looks "inside" to each of them; the model still gives it one owner
(either is right for Hard), usually with confidence, so its margin is not small and it is not
flagged as a conflict. Where label sets overlap, the per-teacher mixtures say more: they call
such a text "in" for every teacher that knows its label, and the margin between them is small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.gaussians import Gaussians

_ITERATIONS = 200


@dataclass(frozen=True)
class OwnerMixture:
    """The fitted owner model: teacher shares and each teacher's outside/inside Gaussians."""

    shares: Tensor                   # (N,) P(z = i) over the pool
    gaussians: tuple[Gaussians, ...]  # per teacher: component 0 outside, 1 inside

    def log_ratios(self, points: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """Per text and teacher log N_in / N_out, shape (n, N), and the sum over teachers of
        log N_out, shape (n,) (the part every owner shares)."""
        ratios, outside = [], 0.0
        for gaussians, teacher_points in zip(self.gaussians, points, strict=True):
            log_densities = gaussians.log_densities(teacher_points)  # (n, 2)
            ratios.append(log_densities[:, 1] - log_densities[:, 0])
            outside = outside + log_densities[:, 0]
        return torch.stack(ratios, dim=1), outside

    def posterior(self, points: Sequence[Tensor]) -> Tensor:
        """P(z = i | every teacher's features), shape (n, N), rows summing to 1."""
        ratios, _ = self.log_ratios(points)
        return torch.softmax(torch.log(self.shares) + ratios, dim=1)


def fit_owner_mixture(points: Sequence[Tensor], *, iterations: int = _ITERATIONS,
                      tolerance: float = 1e-7) -> OwnerMixture:
    """EM for the owner model on per-teacher (n, F_i) points whose columns grow towards
    "mine" and are on comparable scales (e.g. normal quantiles over the pool). It starts
    from each text given to the teacher whose columns are highest on average."""
    n = len(points[0])
    if n < 4:
        raise ValueError(f"a routing mixture needs at least 4 texts, got {n}")
    start = torch.stack([teacher_points.mean(dim=1) for teacher_points in points], dim=1)
    responsibilities = torch.nn.functional.one_hot(start.argmax(dim=1), len(points)).double()
    previous, mixture = -math.inf, None
    for _ in range(iterations):
        shares = responsibilities.mean(dim=0).clamp_min(1e-6)
        gaussians = tuple(
            Gaussians.fit(teacher_points, torch.stack([1 - owned, owned], dim=1))
            for teacher_points, owned in zip(points, responsibilities.T, strict=True))
        mixture = OwnerMixture(shares / shares.sum(), gaussians)
        ratios, outside = mixture.log_ratios(points)
        log_joint = torch.log(mixture.shares) + ratios                  # (n, N)
        log_likelihood = (torch.logsumexp(log_joint, dim=1) + outside).mean().item()
        responsibilities = torch.softmax(log_joint, dim=1)
        if log_likelihood - previous < tolerance:
            break
        previous = log_likelihood
    return mixture
