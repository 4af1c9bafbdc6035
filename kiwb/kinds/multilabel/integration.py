"""Per-label integration of multi-label teachers into one target per (text, label).

Teachers' probabilities are laid out on the union of their labels as (T, n, L), with an owner
mask (T, L): a teacher says nothing about a label it does not own, so every integrator decides
a label over its owners only. A label with one owner takes that owner's probability under
every integrator.

  ant         ANT's eq. 28: the owners' minimum if every owner says <= 0.5, else their maximum
              (one owner's positive answer is trusted over the others' silence)
  vote        the owners' majority, ties positive (ANT's baseline BL), as 0 or 1
  mean        the owners' mean probability
  muki-hard   the probability of the owner most confident on that label of that text
  muki-soft   the owners' probabilities weighted by softmax(confidence / tau)

MUKI's re-weighting carries over per label: the margin between the two most confident owners
weighs that (text, label) in the loss; a lone owner competes with nobody, so its confidence is
the margin (as for a lone teacher in kiwb.core.integration.routing_margin). The margins are
rescaled to a mean of 1 within each label's yes targets and within its no targets: owners are
less sure of their yes answers than of their no (on the multi-label demo the mean margin of a
yes target was 0.52, of a no 0.66), and raw margins moved a fifth of the yes targets' weight
to the no targets, so students learnt the labels' yes too slowly to fit them (fit 85% against
93% without margins; BENCHMARKS.md, "Students that fit their targets"). Within a side, the
surer answers still count more, as MUKI means.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.choices import MULTILABEL_METHODS

THRESHOLD = 0.5


@dataclass(frozen=True)
class LabelIntegration:
    """Targets and weights for n texts over L union labels under one method."""

    targets: Tensor  # (n, L) probabilities in [0, 1]
    weights: Tensor  # (n, L) each (text, label)'s weight in the loss
    routed: Tensor  # (n, L) long: the most confident owner of the label on the text
    margin: Tensor  # (n, L): its confidence minus the next owner's


def check_owners(probs: Tensor, owners: Tensor) -> None:
    """Shapes agree and every union label has an owner; ValueError naming what is wrong."""
    if probs.dim() != 3 or owners.shape != (probs.shape[0], probs.shape[2]):
        raise ValueError(f"teacher probabilities {tuple(probs.shape)} (T, n, L) and owners "
                         f"{tuple(owners.shape)} (T, L) do not agree")
    orphans = (~owners.any(0)).nonzero().flatten().tolist()
    if orphans:
        raise ValueError(f"union labels {orphans} have no owner; every label needs a teacher")


def _owned(values: Tensor, owners: Tensor, fill: float) -> Tensor:
    """(T, n, L) values with non-owners' entries replaced by `fill`."""
    return values.masked_fill(~owners[:, None, :], fill)


def ant_targets(probs: Tensor, owners: Tensor) -> Tensor:
    """ANT eq. 28 per (text, label): min over owners if all say <= 0.5, else max. (n, L)."""
    check_owners(probs, owners)
    highest = _owned(probs, owners, -1.0).amax(0)
    lowest = _owned(probs, owners, 2.0).amin(0)
    return torch.where(highest > THRESHOLD, highest, lowest)


def vote_targets(probs: Tensor, owners: Tensor) -> Tensor:
    """The owners' majority (> 0.5 counts as yes), ties positive, as 0.0 or 1.0. (n, L)."""
    check_owners(probs, owners)
    yes = _owned((probs > THRESHOLD).to(probs.dtype), owners, 0.0).sum(0)
    count = owners.sum(0).to(probs.dtype)  # (L,)
    return (2.0 * yes >= count).to(probs.dtype)


def mean_targets(probs: Tensor, owners: Tensor) -> Tensor:
    """The owners' mean probability per (text, label). (n, L)."""
    check_owners(probs, owners)
    return _owned(probs, owners, 0.0).sum(0) / owners.sum(0).to(probs.dtype)


def most_confident_owner(confidences: Tensor, owners: Tensor) -> Tensor:
    """Index of the most confident owner per (text, label), ties to the lowest index. (n, L)."""
    return _owned(confidences, owners, -torch.inf).argmax(0)


def owner_margin(confidences: Tensor, owners: Tensor) -> Tensor:
    """Top owner's confidence minus the second's; a lone owner's own confidence. (n, L)."""
    masked = _owned(confidences, owners, -torch.inf)
    if masked.shape[0] == 1:
        return masked[0]
    top_two = masked.topk(2, dim=0).values  # (2, n, L)
    lone = torch.isinf(top_two[1])
    return torch.where(lone, top_two[0], top_two[0] - top_two[1].masked_fill(lone, 0.0))


def muki_hard_targets(probs: Tensor, confidences: Tensor, owners: Tensor) -> Tensor:
    """The most confident owner's probability per (text, label). (n, L)."""
    check_owners(probs, owners)
    return probs.gather(0, most_confident_owner(confidences, owners)[None]).squeeze(0)


def muki_soft_targets(probs: Tensor, confidences: Tensor, owners: Tensor,
                      tau: float = 0.2) -> Tensor:
    """Owners' probabilities weighted by softmax(confidence / tau) over the owners. (n, L)."""
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    check_owners(probs, owners)
    weights = torch.softmax(_owned(confidences, owners, -torch.inf) / tau, dim=0)
    return (weights * probs).sum(0)


def side_balanced(margin: Tensor, targets: Tensor) -> Tensor:
    """(n, L) loss weights: each margin over the mean margin of its label's targets on the same
    side (yes: target > THRESHOLD, else no). A side whose margins are all 0 weighs 1 each."""
    yes = targets > THRESHOLD
    weights = torch.ones_like(margin)
    for side in (yes, ~yes):
        mean = (margin * side).sum(0) / side.sum(0).clamp(min=1)  # (L,)
        scaled = margin / mean.clamp(min=torch.finfo(margin.dtype).tiny)
        weights = torch.where(side & (mean > 0), scaled, weights)
    return weights


def integrate_labels(method: str, probs: Tensor, confidences: Tensor, owners: Tensor, *,
                     tau: float = 0.2, reweight: bool = True,
                     balance_sides: bool = True) -> LabelIntegration:
    """Targets of one method, with MUKI's per-label margins as weights (others weigh 1),
    side_balanced unless `balance_sides` is False (the raw margins)."""
    if method not in MULTILABEL_METHODS:
        raise ValueError(f"unknown multi-label method {method!r}; choose one of "
                         f"{', '.join(MULTILABEL_METHODS)}")
    builders = {"ant": lambda: ant_targets(probs, owners),
                "vote": lambda: vote_targets(probs, owners),
                "mean": lambda: mean_targets(probs, owners),
                "muki-hard": lambda: muki_hard_targets(probs, confidences, owners),
                "muki-soft": lambda: muki_soft_targets(probs, confidences, owners, tau)}
    margin = owner_margin(confidences, owners)
    targets = builders[method]()
    if not (reweight and method.startswith("muki-")):
        weights = torch.ones_like(margin)
    else:
        weights = side_balanced(margin, targets) if balance_sides else margin
    return LabelIntegration(targets=targets, weights=weights,
                            routed=most_confident_owner(confidences, owners), margin=margin)
