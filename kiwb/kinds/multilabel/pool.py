"""A multi-label data set's stored scores laid out on the union of labels, integrated, and its
conflicts: the pure part of the kind's integration job, from per-teacher (n, C_t) arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from kiwb.kinds.multilabel.integration import THRESHOLD, LabelIntegration, integrate_labels
from kiwb.kinds.multilabel.transfer import cooccurrence, transfer


@dataclass(frozen=True)
class LabelScores:
    """Every teacher's scores of one data set on the union labels (zeros where not owned)."""

    teachers: list[str]
    union: list[str]
    owners: Tensor          # (T, L) bool: the teacher has the label
    det_probs: Tensor       # (T, n, L) dropout off: what the targets are made of
    mc_probs: Tensor        # (T, n, L) mean over the K passes
    mc_confidence: Tensor   # (T, n, L) per-label confidence from the passes
    det_confidence: Tensor  # (T, n, L) per-label confidence of one plain pass (the ablation)

    @property
    def shared(self) -> Tensor:
        """(L,) bool: labels two or more teachers own."""
        return self.owners.sum(0) >= 2


def stack_label_scores(teachers: Sequence[str], label_sets: Sequence[Sequence[str]],
                       arrays: Sequence[Mapping[str, np.ndarray]]) -> LabelScores:
    """Per-teacher (n, C_t) score arrays placed in (T, n, L) union slots."""
    union = list(dict.fromkeys(label for labels in label_sets for label in labels))
    count = len(next(iter(arrays[0].values())))
    owners = torch.zeros(len(teachers), len(union), dtype=torch.bool)
    slots = {name: torch.zeros(len(teachers), count, len(union))
             for name in ("det_probs", "mc_probs", "mc_confidence", "det_confidence")}
    for teacher, (labels, found) in enumerate(zip(label_sets, arrays, strict=True)):
        positions = torch.tensor([union.index(label) for label in labels])
        owners[teacher, positions] = True
        for name, values in slots.items():
            values[teacher][:, positions] = torch.from_numpy(np.asarray(found[name])).float()
    return LabelScores(list(teachers), union, owners, **slots)


def integrate_label_scores(scores: LabelScores, method: str, *, use_mc: bool = True,
                           with_transfer: bool = False, tau: float = 0.2,
                           reweight: bool = True, balance_sides: bool = True) -> LabelIntegration:
    """Targets per (text, label) under `method`; `use_mc` picks the MC or the plain confidence,
    `with_transfer` first revises the teachers' answers through their label dependencies."""
    confidences = scores.mc_confidence if use_mc else scores.det_confidence
    probs = scores.det_probs
    if with_transfer:
        statistics = [cooccurrence(probs[teacher]) for teacher in range(len(scores.teachers))]
        probs = transfer(probs, confidences, scores.owners, statistics)
    return integrate_labels(method, probs, confidences, scores.owners, tau=tau, reweight=reweight,
                            balance_sides=balance_sides)


@dataclass(frozen=True)
class LabelConflict:
    """A text and a shared label whose owners disagree (one says yes, another no)."""

    text: int
    label: str
    margin: float       # the two most confident owners' gap: small is worth a look
    says_yes: list[str]  # the owners that say the label
    target: float       # what the integration decided


def label_conflicts(scores: LabelScores, integration: LabelIntegration) -> list[LabelConflict]:
    """Every (text, shared label) pair whose owners disagree, smallest margin first."""
    yes = (scores.det_probs > THRESHOLD) & scores.owners[:, None, :]  # (T, n, L)
    no = (scores.det_probs <= THRESHOLD) & scores.owners[:, None, :]
    disagree = yes.any(0) & no.any(0) & scores.shared[None]  # (n, L)
    texts, labels = disagree.nonzero(as_tuple=True)
    found = [LabelConflict(text=int(text), label=scores.union[int(label)],
                           margin=float(integration.margin[text, label]),
                           says_yes=[scores.teachers[t] for t in yes[:, text, label].nonzero()
                                     .flatten().tolist()],
                           target=float(integration.targets[text, label]))
             for text, label in zip(texts.tolist(), labels.tolist(), strict=True)]
    return sorted(found, key=lambda conflict: (conflict.margin, conflict.text, conflict.label))
