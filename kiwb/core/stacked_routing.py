"""Stacked routing: which teacher's labels a text belongs to, learned from labeled texts.

One multinomial logistic regression over the teachers, read from everything they said about
the text: each teacher's rank score (its confidence as a pool quantile, the label-free
routing), its log-probabilities over its own labels and its margin. The rank scores enter
with a fixed slope; every other weight has a ridge toward zero, so with no labels (or a huge
ridge) it routes as rank routing does, a handful of labels only nudges it, and a few hundred
can learn patterns such as "teacher A reads this as mail while B is sure of net: it is B's". Labels taken from one region (the
lowest-margin conflicts) move the boundary where they lie instead of the whole routing:
the per-teacher logistic trust model kiwb once had, fitted on such labels alone, routed every
text to one teacher (BENCHMARKS.md, "Labeling conflicts"), and was removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

# The ridge on the other weights and the rank scores' slope (a rank gap of 0.1 is worth one
# logit): chosen together on debian-8 dev, as the best mean routing accuracy over 16, 64 and
# 256 labels taken from the conflicts list and at random (BENCHMARKS.md). A fitted slope did
# worse: a few labels that disagree with rank routing drove it to zero.
STACK_L2 = 3.0
RANK_SLOPE = 10.0


@dataclass(frozen=True)
class StackedOwner:
    """P(text in teacher i's labels | every teacher's outputs), fitted on labeled texts.

    Reads the rank routing's (n, N) scores, which the caller computes, and each teacher's
    features (kiwb.core.routing.TeacherFeatures)."""

    use_mc: bool
    mean: Tensor     # (F,) the pool's feature means and scales
    scale: Tensor    # (F,)
    weights: Tensor  # (F, N)
    bias: Tensor     # (N,)

    def posterior(self, ranks: Tensor, features: Sequence) -> Tensor:
        """(n, N) probability that each teacher's labels hold the text."""
        extra = (teacher_outputs(features, self.use_mc) - self.mean) / self.scale
        return (RANK_SLOPE * ranks + extra @ self.weights + self.bias).softmax(dim=1)


def teacher_outputs(features: Sequence, use_mc: bool) -> Tensor:
    """(n, F): per teacher its log-probabilities over its labels and its margin (the MC
    log-margin, or the logit margin without MC dropout)."""
    columns = []
    for teacher in features:
        columns.append(torch.log_softmax(teacher.det_logits.double(), dim=1))
        columns.append(teacher.margin(use_mc).unsqueeze(1))
    return torch.cat(columns, dim=1)


def fit_stacked_owner(pool: Sequence, labeled: Sequence, ranks: Tensor, owners: Tensor, *,
                      use_mc: bool = True, l2: float | None = None) -> StackedOwner:
    """Fit on labeled texts with rank scores `ranks` (n_l, N); `owners` (n_l, N) is True where
    teacher i's labels hold the text's label (more than one teacher for a shared label).
    `l2`: the ridge (default STACK_L2)."""
    l2 = STACK_L2 if l2 is None else l2
    if owners.shape[0] == 0:
        raise ValueError("stacked routing needs labeled texts; label some first")
    pool_outputs = teacher_outputs(pool, use_mc)
    mean, scale = pool_outputs.mean(0), pool_outputs.std(0).clamp_min(1e-6)
    extra = (teacher_outputs(labeled, use_mc) - mean) / scale
    ranks = ranks.double()
    log_owner = torch.log(owners.double().clamp_min(1e-300))  # (n_l, N): 0 or -inf, in effect
    num_features, num_teachers = extra.shape[1], ranks.shape[1]
    weights = torch.zeros(num_features, num_teachers, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_teachers, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights, bias], max_iter=200,
                                  line_search_fn="strong_wolfe")

    def loss() -> Tensor:
        optimizer.zero_grad()
        log_probs = (RANK_SLOPE * ranks + extra @ weights + bias).log_softmax(dim=1)
        # -log P(the text's owner): summed over owners when a label is shared
        nll = -torch.logsumexp(log_probs + log_owner, dim=1).sum()
        total = nll + l2 * (weights.pow(2).sum() + bias.pow(2).sum())
        total.backward()
        return total

    optimizer.step(loss)
    return StackedOwner(use_mc, mean, scale, weights.detach(), bias.detach())
