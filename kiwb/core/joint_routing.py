"""A router that reads every teacher's representation at once: one multinomial logistic
regression from the teachers' representations of a text, side by side, to the teacher whose
labels hold it.

The per-teacher routings read each teacher alone and compare quantiles; this one learns where
the teachers' views of a text disagree. Label-free, it is fitted on another routing's answers
on the pool (self-training: the regression smooths that routing's scattered mistakes, not its
systematic ones); with a few labels, the labeled texts join those answers at a higher weight.
The pool is routed by the model fitted on all of it: routing each text by a model that did not
see its own answer (5 folds) routed debian-8's pool alike (87.8% against 88.0%), so kiwb does
not pay for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

# The routings whose answers on the pool it is fitted on (the mean of their per-teacher
# quantile scores), the ridge and a labeled text's weight: chosen on the dev sets
# (BENCHMARKS.md, "Choosing the routing").
JOINT_BASES = ("mahalanobis", "knn")
RIDGE = 100.0      # L2 on the weights over the fit's total weight (the features are standardised)
LABEL_WEIGHT = 10.0  # a labeled text counts as this many pool answers
_ITERATIONS = 100


@dataclass(frozen=True)
class JointFeatures:
    """Every teacher's representation standardised on the pool, side by side."""

    means: tuple[Tensor, ...]   # per teacher (d_i,)
    scales: tuple[Tensor, ...]  # per teacher (d_i,)

    @classmethod
    def fit(cls, representations: Sequence[Tensor]) -> JointFeatures:
        means, scales = [], []
        for rows in representations:
            rows = rows.float()
            means.append(rows.mean(0))
            scales.append(rows.std(0).clamp_min(1e-6))
        return cls(tuple(means), tuple(scales))

    def __call__(self, representations: Sequence[Tensor]) -> Tensor:
        """(n, sum d_i) float32."""
        return torch.cat([(rows.float() - mean) / scale for rows, mean, scale
                          in zip(representations, self.means, self.scales, strict=True)], dim=1)


@dataclass(frozen=True)
class JointModel:
    """P(teacher i's labels hold the text | every teacher's representation)."""

    features: JointFeatures
    weights: Tensor  # (D, N)
    bias: Tensor     # (N,)

    def scores(self, representations: Sequence[Tensor]) -> Tensor:
        return (self.features(representations) @ self.weights + self.bias).softmax(dim=1).double()


def fit_softmax(points: Tensor, targets: Tensor, sample_weights: Tensor, ridge: float = RIDGE,
                iterations: int = _ITERATIONS) -> tuple[Tensor, Tensor]:
    """Multinomial logistic regression by L-BFGS: `targets` (n, N) probabilities (one-hot, or
    a mass over several owners), `sample_weights` (n,). Returns weights (D, N), bias (N,)."""
    num_classes = targets.shape[1]
    weights = torch.zeros(points.shape[1], num_classes, requires_grad=True)
    bias = torch.zeros(num_classes, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights, bias], max_iter=iterations,
                                  line_search_fn="strong_wolfe")
    total = sample_weights.sum()

    def loss() -> Tensor:
        optimizer.zero_grad()
        log_probs = (points @ weights + bias).log_softmax(dim=1)
        value = -(sample_weights * (targets * log_probs).sum(1)).sum() / total
        value = value + ridge / total * weights.pow(2).sum()
        value.backward()
        return value

    optimizer.step(loss)
    return weights.detach(), bias.detach()


def fit_joint(pool: Sequence[Tensor], answers: Tensor, *, labeled: Sequence[Tensor] | None = None,
              owners: Tensor | None = None, ridge: float = RIDGE,
              label_weight: float = LABEL_WEIGHT) -> JointModel:
    """Fit on the pool's `answers` (n, N): another routing's (one-hot, or its scores made a
    distribution), and optionally labeled texts' representations `labeled` with `owners`
    (n_l, N) bool: the teachers whose labels hold each one's label."""
    features = JointFeatures.fit(pool)
    points, targets = features(pool), answers.float()
    weights = torch.ones(len(points))
    if labeled is not None and owners is not None and len(owners):
        owned = owners.float()
        points = torch.cat([points, features(labeled)])
        targets = torch.cat([targets, owned / owned.sum(1, keepdim=True).clamp_min(1)])
        weights = torch.cat([weights, torch.full((len(owned),), label_weight)])
    coefficients, bias = fit_softmax(points, targets, weights, ridge)
    return JointModel(features, coefficients, bias)

