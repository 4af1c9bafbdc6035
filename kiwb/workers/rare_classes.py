"""Rare classes in an integration: the corrections that keep a class in the targets, and the
class funnel that shows which step loses one (kiwb.core.class_priors, kiwb.core.class_funnel)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from kiwb.core import class_funnel, class_priors
from kiwb.core import integration as integ
from kiwb.core.routing import FittedRouting
from kiwb.project.records import ClassFunnel, IntegrationSettings, LabeledFunnel


class TeacherScores(Protocol):
    """What is read here of kiwb.kinds.sequence.integration.TeacherScores (which imports this
    module)."""

    teachers: list[str]
    labels: list[str]
    positions: list[torch.Tensor]
    coverage: torch.Tensor
    det_probs: Sequence[torch.Tensor]

    def routing_scores(self, fitted: FittedRouting) -> torch.Tensor: ...

    def true_label_ids(self) -> torch.Tensor | None: ...


@dataclass(frozen=True)
class ClassBalance:
    """What the pool's integration found of its classes, to apply to other texts alike."""

    prior: torch.Tensor                # (|Y|,) the pool's class mix as the teachers estimate it


def estimated_prior(scores: TeacherScores, fitted: FittedRouting,
                    settings: IntegrationSettings) -> torch.Tensor:
    """The pool's class mix: what each teacher says, on the texts the routing says it owns."""
    owned = class_priors.ownership(scores.routing_scores(fitted), fitted.probabilistic,
                                   settings.tau)
    padded = integ.uhc_targets(scores.det_probs, scores.positions, len(scores.labels))
    return class_priors.union_prior(owned, padded)


def balance_classes(settings: IntegrationSettings, scores: TeacherScores, fitted: FittedRouting,
                    result: integ.Integration) -> tuple[integ.Integration, ClassBalance]:
    """The integration with the settings' rare-class corrections applied to its targets and
    weights (unchanged when they are off), and the class mix it was corrected towards."""
    prior = estimated_prior(scores, fitted, settings)
    targets, weights = result.targets, result.weights
    if settings.class_weighting:
        mix = class_priors.target_prior(targets, weights)
        weights = class_priors.class_balance_weights(
            weights, class_funnel.target_top_classes(targets), mix, settings.class_weighting)
    return replace(result, targets=targets, weights=weights), ClassBalance(prior)


def pool_class_funnel(scores: TeacherScores, result: integ.Integration,
                      balance: ClassBalance) -> ClassFunnel:
    """The label-free funnel of the pool's integration."""
    top = class_funnel.teacher_top_classes(scores.det_probs, scores.positions)
    counts = class_funnel.pool_funnel(top, result.routed, result.targets, result.weights,
                                      len(scores.labels))
    owners = {label: [name for name, covers in zip(scores.teachers, scores.coverage[:, index].tolist(),
                                                  strict=True) if covers]
              for index, label in enumerate(scores.labels)}
    return ClassFunnel(labels=list(scores.labels), owners=owners,
                       num_texts=len(result.routed), estimated_share=balance.prior.tolist(),
                       **counts)


def labeled_class_funnel(scores: TeacherScores, result: integ.Integration,
                         where: str) -> LabeledFunnel:
    """The funnel on labeled texts (`scores` with true labels, `result` their integration)."""
    top = class_funnel.teacher_top_classes(scores.det_probs, scores.positions)
    found = class_funnel.labeled_funnel(top, result.routed, result.targets,
                                        scores.true_label_ids(), len(scores.labels))
    return LabeledFunnel(where=where, **found)
