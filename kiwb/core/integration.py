"""Integration of N teachers' predictions into training targets over the union label set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.choices import INTEGRATION_METHODS


@dataclass(frozen=True)
class Integration:
    """Targets, instance weights and routing for n texts under one integration method."""

    targets: Tensor  # (n, |Y|), or (n, N, |Y|) for uhc
    weights: Tensor  # (n,)
    routed: Tensor  # (n,) long: most confident teacher
    margin: Tensor  # (n,)
    confidences: Tensor  # (n, N): the routing scores actually used


def pad_to_union(probs: Tensor, positions: Tensor, num_union: int) -> Tensor:
    """Place (n, C_i) teacher probabilities into (n, |Y|) union slots, zeros elsewhere."""
    padded = probs.new_zeros(probs.shape[0], num_union)
    # index_add (not scatter) so a label listed twice by one teacher keeps all its mass.
    return padded.index_add(1, positions, probs)


def routed_teacher(confidences: Tensor) -> Tensor:
    """Index of the most confident teacher per text, ties to the lowest index, shape (n,)."""
    return confidences.argmax(dim=1)


def routing_margin(confidences: Tensor) -> Tensor:
    """Margin c_max - c_second between the two most confident teachers, shape (n,)."""
    if confidences.shape[1] == 1:
        # A lone teacher competes with nobody, so its whole confidence is the margin.
        return confidences[:, 0]
    top_two = confidences.topk(2, dim=1).values  # (n, N) -> (n, 2)
    return top_two[:, 0] - top_two[:, 1]


def uhc_targets(
    teacher_probs: Sequence[Tensor], positions: Sequence[Tensor], num_union: int
) -> Tensor:
    """Each teacher's distribution padded into the union, shape (n, N, |Y|)."""
    if len(teacher_probs) != len(positions):
        raise ValueError(
            f"got {len(teacher_probs)} teacher distributions but {len(positions)} position lists"
        )
    padded = [
        pad_to_union(probs, where, num_union)
        for probs, where in zip(teacher_probs, positions, strict=True)
    ]
    return torch.stack(padded, dim=1)  # N x (n, |Y|) -> (n, N, |Y|)


def muki_hard_targets(
    confidences: Tensor,
    teacher_probs: Sequence[Tensor],
    positions: Sequence[Tensor],
    num_union: int,
) -> Tensor:
    """MUKI-Hard: the most confident teacher's padded distribution, shape (n, |Y|)."""
    padded = uhc_targets(teacher_probs, positions, num_union)  # (n, N, |Y|)
    rows = torch.arange(padded.shape[0], device=padded.device)
    return padded[rows, routed_teacher(confidences)]


def soft_weights(scores: Tensor, tau: float, probabilistic: bool) -> Tensor:
    """Teacher weights per text, shape (n, N), rows summing to 1: softmax(c / tau) for MUKI's
    confidences; the estimates themselves, normalised, for probability-like routing scores."""
    if not probabilistic:
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        return torch.softmax(scores / tau, dim=1)
    totals = scores.sum(dim=1, keepdim=True)
    # A text no teacher claims (all estimates 0) is shared equally rather than dropped.
    uniform = torch.full_like(scores, 1.0 / scores.shape[1])
    return torch.where(totals > 0, scores / totals.clamp_min(1e-300), uniform)


def muki_soft_targets(
    confidences: Tensor,
    teacher_probs: Sequence[Tensor],
    positions: Sequence[Tensor],
    num_union: int,
    tau: float,
    probabilistic: bool = False,
) -> Tensor:
    """MUKI-Soft: padded distributions mixed by the soft teacher weights, shape (n, |Y|)."""
    padded = uhc_targets(teacher_probs, positions, num_union)  # (n, N, |Y|)
    teacher_weights = soft_weights(confidences, tau, probabilistic).to(padded.dtype)  # (n, N)
    # Weights sum to 1 and each padded row sums to 1, so the mixture does too,
    # with a shared label collecting the weighted sum of its teachers' mass.
    return torch.einsum("nt,nty->ny", teacher_weights, padded)


def concatenated_logit_probs(
    teacher_logits: Sequence[Tensor], positions: Sequence[Tensor], num_union: int
) -> Tensor:
    """Softmax over all teachers' concatenated logits, merged into union slots, shape (n, |Y|)."""
    probs = torch.softmax(torch.cat(list(teacher_logits), dim=1), dim=1)  # (n, sum C_i)
    # A label listed by several teachers owns several logits; its slot gets their summed mass.
    return pad_to_union(probs, torch.cat(list(positions)), num_union)


def routing_accuracy(confidences: Tensor, true_union_labels: Tensor, coverage: Tensor) -> float:
    """Fraction of texts whose top-scored teacher covers the true label."""
    covered = coverage[routed_teacher(confidences), true_union_labels]  # (n,)
    return covered.float().mean().item()


def _targets(
    method: str,
    confidences: Tensor,
    det_probs: Sequence[Tensor],
    det_logits: Sequence[Tensor],
    positions: Sequence[Tensor],
    num_union: int,
    tau: float,
    probabilistic: bool,
) -> Tensor:
    """Targets of one known integration method."""
    if method == "muki-hard":
        # MUKI routes by the routing scores but trains on the deterministic prediction q_i.
        return muki_hard_targets(confidences, det_probs, positions, num_union)
    if method == "muki-soft":
        return muki_soft_targets(confidences, det_probs, positions, num_union, tau, probabilistic)
    if method == "vanilla-kd":
        return concatenated_logit_probs(det_logits, positions, num_union)
    return uhc_targets(det_probs, positions, num_union)


def integrate(
    method: str,
    *,
    routing_scores: Tensor,
    det_probs: Sequence[Tensor],
    det_logits: Sequence[Tensor],
    positions: Sequence[Tensor],
    num_union: int,
    tau: float = 0.2,
    reweight: bool = True,
    probabilistic: bool = False,
) -> Integration:
    """Build targets, instance weights and routing for one integration method.

    `routing_scores` (n, N) say how likely each teacher knows each text: MUKI's confidences
    (`probabilistic=False`: Soft weighs them by softmax(c / tau)) or a calibrated estimate of
    P(label in Y_i | x) (`probabilistic=True`: Soft normalises them). They decide the Hard
    choice, the Soft weights and the re-weighting margin alike.
    """
    if method not in INTEGRATION_METHODS:
        raise ValueError(
            f"unknown integration method {method!r}; choose one of {', '.join(INTEGRATION_METHODS)}"
        )
    confidences = routing_scores
    margin = routing_margin(confidences)
    # Only MUKI re-weights; the baselines train every text at full weight.
    if reweight and method.startswith("muki-"):
        weights = margin
    else:
        weights = torch.ones_like(margin)
    return Integration(
        targets=_targets(method, confidences, det_probs, det_logits, positions, num_union, tau,
                         probabilistic),
        weights=weights,
        routed=routed_teacher(confidences),
        margin=margin,
        confidences=confidences,
    )
