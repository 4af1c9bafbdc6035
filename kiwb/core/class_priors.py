"""Class priors of the union, and two ways to keep a rare class in the student.

Integration loses a rare class when its texts are routed to a teacher that does not know it:
that teacher gives them one of its own labels, so the targets carry the class less often than
the pool holds it, and a softmax student trained a few hundred steps stops predicting it.
The pool's class mix can be estimated without labels, from what each teacher says on the texts
the routing estimates it owns (`union_prior`). Against it:

- `logit_offsets`: logit adjustment (Menon et al. 2021): the student's loss reads its logits
  plus strength · log(prior of the targets) (`[integration] logit_adjustment`; not MUKI-Soft's
  temperature `tau`), so the raw logits it predicts with favour rare classes.
- `class_balance_weights`: each text's weight divided by its target class's share, to a power.

Which of them kiwb uses by default was chosen on debian-8 dev (BENCHMARKS.md, "Rare classes").
Prior correction of the targets (Saerens et al.'s adjustment, re-weighting each target per
class towards the estimated mix) was a third; it never beat the default there or on the demo,
and was removed.
"""

from __future__ import annotations

import torch
from torch import Tensor

_FLOOR = 1e-12  # a class with no mass keeps a finite log and ratio
_EM_ITERATIONS = 500


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


def adjust_to_prior(posteriors: Tensor, old_prior: Tensor, new_prior: Tensor) -> Tensor:
    """Saerens et al.'s eq. 2.4: p'(y|x) ∝ p(y|x) · new(y) / old(y), rows renormalised.
    A class with no old mass keeps none (its ratio is 0, not inf)."""
    ratio = torch.where(old_prior > _FLOOR, new_prior / old_prior.clamp_min(_FLOOR),
                        torch.zeros_like(new_prior))
    adjusted = posteriors.double() * ratio
    totals = adjusted.sum(-1, keepdim=True)
    # A row whose every class lost its mass stays as it was rather than dividing by zero.
    return torch.where(totals > 0, adjusted / totals.clamp_min(1e-300), posteriors.double())


def saerens_priors(posteriors: Tensor, train_prior: Tensor, *, weights: Tensor | None = None,
                   iterations: int = _EM_ITERATIONS, tolerance: float = 1e-10) -> Tensor:
    """The class priors of new data by Saerens et al.'s EM, (C,): `posteriors` (n, C) of a
    classifier trained under `train_prior`, each text at `weights` (default 1)."""
    weights = torch.ones(len(posteriors), dtype=torch.float64) if weights is None else weights.double()
    prior = train_prior.double()
    for _ in range(iterations):
        adjusted = adjust_to_prior(posteriors, train_prior.double(), prior)  # E step
        updated = (weights.unsqueeze(1) * adjusted).sum(0) / weights.sum().clamp_min(_FLOOR)  # M step
        if float((updated - prior).abs().max()) < tolerance:
            return updated
        prior = updated
    return prior


def logit_offsets(prior: Tensor, strength: float) -> Tensor:
    """strength · log prior, (|Y|,): added to the student's logits inside the loss only."""
    return strength * torch.log(prior.double().clamp_min(_FLOOR))


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
