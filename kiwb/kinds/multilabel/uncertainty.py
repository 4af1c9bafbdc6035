"""Uncertainty of a multi-label (sigmoid) teacher, per text and label.

Each label of a sigmoid head is its own yes/no question, so a teacher can know one label of a
text well and another not at all: uncertainty is measured per label, from the K Monte-Carlo
passes' probabilities of that label alone.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

LOG_2 = math.log(2.0)


def binary_entropy(probs: Tensor) -> Tensor:
    """Natural-log entropy of each Bernoulli probability, same shape; 0 at 0 and 1, log 2 at 0.5."""
    # xlogy defines 0 * log 0 = 0, so certain answers give exactly zero.
    return -(torch.special.xlogy(probs, probs) + torch.special.xlogy(1.0 - probs, 1.0 - probs))


def label_mutual_information(pass_probs: Tensor) -> Tensor:
    """BALD mutual information per label of (K, ...) pass probabilities: the entropy of the
    mean minus the mean entropy, shape (...). High where the passes disagree."""
    information = binary_entropy(pass_probs.mean(0)) - binary_entropy(pass_probs).mean(0)
    # Jensen makes it non-negative; rounding can dip just below zero.
    return information.clamp(min=0.0)


def mc_label_confidence(pass_probs: Tensor) -> Tensor:
    """1 - (H(mean) + MI) / (2 log 2) per label, in [0, 1], from (K, ...) pass probabilities.

    The entropy of the mean says the teacher leans neither way; the mutual information says
    its passes disagree (an unsure answer that happens to average out to a confident-looking
    mean). Each is at most log 2, so their sum over 2 log 2 stays in [0, 1]."""
    uncertainty = binary_entropy(pass_probs.mean(0)) + label_mutual_information(pass_probs)
    return (1.0 - uncertainty / (2.0 * LOG_2)).clamp(0.0, 1.0)


def plain_label_confidence(probs: Tensor) -> Tensor:
    """1 - H(p) / log 2 per label of one deterministic pass, in [0, 1]: the no-MC ablation."""
    return (1.0 - binary_entropy(probs) / LOG_2).clamp(0.0, 1.0)
