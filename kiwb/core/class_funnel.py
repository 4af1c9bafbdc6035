"""Where a class is lost between the teachers and the student, class by class.

A union class reaches the student through a funnel: the teacher that owns it must say it,
the routing must send those texts to that teacher, the targets must then carry it, and the
student must learn it. Each step is counted here, so that a class the student never predicts
can be traced to the step that dropped it:

  on the pool (no labels needed)
    owner_says       texts an owning teacher labels with the class (its top class)
    routed_to_owner  of those, texts the routing sends to an owner that says it
    target_texts     texts whose integrated target has the class on top
    target_share     the class's share of the targets' mass, each text at its weight
    estimated_share  the class's share of the pool as the teachers and the routing estimate
                     it (kiwb.core.class_priors.union_prior): what target_share falls short of
  on labeled texts (the eval set), each a share of the class's own texts
    owner_recall     an owning teacher says the class
    routed_recall    the routing sends the text to an owner that says it
    target_recall    the integrated target has the class on top
  (the student's recall, the last step, comes from a run's evaluation.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def teacher_top_classes(det_probs: Sequence[Tensor], positions: Sequence[Tensor]) -> Tensor:
    """Each teacher's top class per text, as union indices, shape (n, N)."""
    return torch.stack([where[probs.argmax(-1)] for probs, where
                        in zip(det_probs, positions, strict=True)], dim=1)


def target_top_classes(targets: Tensor) -> Tensor:
    """The top class of each text's target, shape (n,); UHC's (n, N, |Y|) averaged first."""
    return (targets if targets.dim() == 2 else targets.mean(1)).argmax(-1)


def target_mass(targets: Tensor, weights: Tensor) -> Tensor:
    """Each class's share of the targets' mass, every text at its instance weight, (|Y|,)."""
    flat = targets if targets.dim() == 2 else targets.mean(1)  # (n, |Y|)
    mass = (weights.double().unsqueeze(1) * flat.double()).sum(0)
    total = mass.sum()
    return mass / total if float(total) > 0 else mass


def _owner_says(top: Tensor, num_labels: int) -> Tensor:
    """(n, |Y|) bool: some teacher has class y as its top class on the text (a teacher's top
    class is always one of its own, so that teacher owns y)."""
    return torch.nn.functional.one_hot(top, num_labels).bool().any(1)  # (n, N, |Y|) -> (n, |Y|)


def _routed_says(top: Tensor, routed: Tensor) -> Tensor:
    """(n,) the routed teacher's top class."""
    return top[torch.arange(len(routed)), routed]


def pool_funnel(top: Tensor, routed: Tensor, targets: Tensor, weights: Tensor,
                num_labels: int) -> dict[str, list]:
    """The label-free steps per union class: counts of texts and the targets' mass share.

    `top` (n, N) each teacher's top class (union indices), `routed` (n,) the routed teacher,
    `targets` (n, |Y|) or (n, N, |Y|), `weights` (n,).
    """
    # The routed teacher owns every class it can say: its top class is a routed-to-owner text.
    routed_top = _routed_says(top, routed)  # (n,)
    return {
        "owner_says": _owner_says(top, num_labels).sum(0).tolist(),
        "routed_to_owner": torch.bincount(routed_top, minlength=num_labels).tolist(),
        "target_texts": torch.bincount(target_top_classes(targets), minlength=num_labels).tolist(),
        "target_share": target_mass(targets, weights).tolist(),
    }


def labeled_funnel(top: Tensor, routed: Tensor, targets: Tensor, gold: Tensor,
                   num_labels: int) -> dict[str, list]:
    """The same steps on labeled texts, each as a share of the class's gold texts (None for a
    class without any): `gold` (n,) union indices."""
    rows = torch.arange(len(gold))
    says = _owner_says(top, num_labels)[rows, gold]  # (n,) an owner says the gold class
    routed_right = _routed_says(top, routed) == gold
    target_right = target_top_classes(targets) == gold
    counts = torch.bincount(gold, minlength=num_labels)

    def recall(hits: Tensor) -> list[float | None]:
        found = torch.bincount(gold[hits], minlength=num_labels)
        return [None if int(total) == 0 else float(hit) / float(total)
                for hit, total in zip(found, counts, strict=True)]

    return {
        "gold": counts.tolist(),
        "owner_recall": recall(says),
        "routed_recall": recall(routed_right),
        "target_recall": recall(target_right),
    }
