"""Uncertainty of teacher predictions from Monte-Carlo dropout passes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PassSummary:
    """Per-text uncertainty summary of K stochastic passes of one teacher."""

    mean_probs: Tensor  # (n, C)
    entropy: Tensor  # (n,) entropy of mean_probs
    confidence: Tensor  # (n,)
    mutual_information: Tensor  # (n,)


def entropy(probs: Tensor) -> Tensor:
    """Natural-log entropy over the last dimension, shape (...,)."""
    # xlogy defines 0 * log 0 = 0, so one-hot rows give exactly zero.
    return -torch.special.xlogy(probs, probs).sum(dim=-1)


def confidence(probs: Tensor) -> Tensor:
    """Confidence 1 - H(p) / log C in [0, 1], shape (...,)."""
    num_labels = probs.shape[-1]
    if num_labels < 2:
        raise ValueError(
            f"confidence needs at least two labels per teacher, got {num_labels} (log 1 = 0)"
        )
    # Rounding can push H slightly past log C or below 0.
    return (1.0 - entropy(probs) / math.log(num_labels)).clamp(0.0, 1.0)


def mutual_information(pass_probs: Tensor) -> Tensor:
    """BALD mutual information H(mean_k p_k) - mean_k H(p_k) of (K, n, C) passes, shape (n,)."""
    information = entropy(pass_probs.mean(dim=0)) - entropy(pass_probs).mean(dim=0)
    # Jensen makes it non-negative; rounding can dip just below zero.
    return information.clamp(min=0.0)


def summarize_passes(pass_probs: Tensor) -> PassSummary:
    """Summarize (K, n, C) pass probabilities into mean, entropy, confidence and MI."""
    mean_probs = pass_probs.mean(dim=0)  # (K, n, C) -> (n, C)
    return PassSummary(
        mean_probs=mean_probs,
        entropy=entropy(mean_probs),
        confidence=confidence(mean_probs),
        mutual_information=mutual_information(pass_probs),
    )
