"""Rare classes in an integration: the class weighting that keeps a rare class in the loss, and the
class funnel that shows which step loses one (kiwb.core.class_priors, kiwb.core.class_funnel)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
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


def estimated_prior(scores: TeacherScores, fitted: FittedRouting,
                    settings: IntegrationSettings) -> torch.Tensor:
    """The pool's class mix: what each teacher says, on the texts the routing says it owns."""
    owned = class_priors.ownership(scores.routing_scores(fitted), fitted.probabilistic,
                                   settings.tau)
    padded = integ.uhc_targets(scores.det_probs, scores.positions, len(scores.labels))
    return class_priors.union_prior(owned, padded)


def weigh_classes(settings: IntegrationSettings, result: integ.Integration) -> integ.Integration:
    """The integration with each text's weight divided by its target class's share to the
    power `class_weighting` (unchanged when it is 0); the targets stay as they are."""
    if not settings.class_weighting:
        return result
    mix = class_priors.target_prior(result.targets, result.weights)
    return replace(result, weights=class_priors.class_balance_weights(
        result.weights, class_funnel.target_top_classes(result.targets), mix,
        settings.class_weighting))


def pool_class_funnel(scores: TeacherScores, result: integ.Integration,
                      prior: torch.Tensor) -> ClassFunnel:
    """The label-free funnel of the pool's integration; `prior` (|Y|,) is the pool's class mix
    as the teachers estimate it (estimated_prior)."""
    top = class_funnel.teacher_top_classes(scores.det_probs, scores.positions)
    counts = class_funnel.pool_funnel(top, result.routed, result.targets, result.weights,
                                      len(scores.labels))
    owners = {label: [name for name, covers in zip(scores.teachers, scores.coverage[:, index].tolist(),
                                                  strict=True) if covers]
              for index, label in enumerate(scores.labels)}
    return ClassFunnel(labels=list(scores.labels), owners=owners,
                       num_texts=len(result.routed), estimated_share=prior.tolist(),
                       **counts)


def labeled_class_funnel(scores: TeacherScores, result: integ.Integration,
                         where: str) -> LabeledFunnel:
    """The funnel on labeled texts (`scores` with true labels, `result` their integration)."""
    top = class_funnel.teacher_top_classes(scores.det_probs, scores.positions)
    found = class_funnel.labeled_funnel(top, result.routed, result.targets,
                                        scores.true_label_ids(), len(scores.labels))
    return LabeledFunnel(where=where, **found)
