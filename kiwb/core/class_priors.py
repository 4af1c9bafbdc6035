"""Class priors of the union, and a way to keep a rare class in the student.

Integration loses a rare class when its texts are routed to a teacher that does not know it:
that teacher gives them one of its own labels, so the targets carry the class less often than
the pool holds it, and a softmax student trained a few hundred steps stops predicting it.
The pool's class mix can be estimated without labels, from what each teacher says on the texts
the routing estimates it owns (`union_prior`). Against it, `class_balance_weights`: each text's
weight divided by its target class's share, to a power (`[integration] class_weighting`).

Two more were measured on debian-8 dev (BENCHMARKS.md, "Rare classes") and removed, as
neither beat the default there or on the demo: prior correction of the targets (Saerens et
al.'s adjustment, re-weighting each target per class towards the estimated mix) and logit
adjustment (Menon et al. 2021: the loss reading the logits plus log(prior of the targets)).
"""

from __future__ import annotations

import torch
from torch import Tensor

_FLOOR = 1e-12  # a class with no mass keeps a finite log and ratio


def ownership(scores: Tensor, probabilistic: bool, tau: float) -> Tensor:
    """P(text x belongs to teacher i's labels), shape (n, N), rows summing to 1: calibrated
    routing estimates normalised per text, or MUKI's softmax(c / tau) of raw confidences."""
    if not probabilistic:
        return torch.softmax(scores.double() / tau, dim=1)
    totals = scores.double().sum(dim=1, keepdim=True)
    uniform = torch.full_like(scores.double(), 1.0 / scores.shape[1])
    return torch.where(totals > 0, scores.double() / totals.clamp_min(1e-300), uniform)


def union_prior(owned: Tensor, padded: Tensor) -> Tensor:
    """The pool's class mix, (|Y|,): mean over texts of sum_i P(owner i | x) p_i(y | x), from
    `owned` (n, N) and each teacher's distribution padded into the union, `padded` (n, N, |Y|).

    Each teacher contributes what it says on the texts it is estimated to own, so a class its
    owner says on texts the Hard routing sends elsewhere still counts at its owned share."""
    mix = torch.einsum("nt,nty->y", owned.double(), padded.double()) / max(1, owned.shape[0])
    return mix / mix.sum().clamp_min(_FLOOR)


def target_prior(targets: Tensor, weights: Tensor) -> Tensor:
    """The targets' class mix, (|Y|,), every text at its instance weight (UHC's per-teacher
    targets averaged); a zero total (every weight 0) gives uniform."""
    flat = (targets if targets.dim() == 2 else targets.mean(1)).double()  # (n, |Y|)
    mass = (weights.double().unsqueeze(1) * flat).sum(0)
    if float(mass.sum()) <= 0:
        return torch.full_like(mass, 1.0 / len(mass))
    return mass / mass.sum()


def class_balance_weights(weights: Tensor, top_classes: Tensor, prior: Tensor,
                          power: float) -> Tensor:
    """Instance weights divided by (|Y| · share of the text's target class) ** power, then
    scaled so their total is unchanged (the loss keeps its size)."""
    if power == 0:
        return weights
    shares = prior.double().clamp_min(_FLOOR)[top_classes] * len(prior)
    balanced = weights.double() / shares.pow(power)
    total = balanced.sum()
    if float(total) <= 0:
        return weights
    return (balanced * (weights.double().sum() / total)).to(weights.dtype)
