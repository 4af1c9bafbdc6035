"""Routing: an estimate, per text and teacher, of whether the text's label is the teacher's.

MUKI compares the teachers' confidences as they are, so a teacher that is sharper everywhere
(trained longer, fewer labels, another temperature) wins texts outside its labels. The paper's
eq. 3 asks for P(label(x) in Y_i | x) instead. The label-free estimates here read each
teacher's scores against that teacher's own distribution over the unlabeled pool, which mixes
texts inside and outside its labels; the few-label ones fit a small model per teacher on a
labeled set. Every router is fitted once (on the pool or the labeled texts) and then applied
to any texts the same teachers scored (pool, eval, test).

Each teacher is read on its own, so the estimates of several teachers are not normalised
against each other: with overlapping label sets a text of a shared label can be "in" for
several teachers at once (Hard then picks the highest, Soft shares the label's mass, and the
margin between them is small, so such a text weighs little and shows among the conflicts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.choices import FEW_LABEL_ROUTINGS, OWN_SCORE_ROUTINGS, ROUTINGS
from kiwb.core.joint_routing import JOINT_BASES, JointModel, fit_joint
from kiwb.core.quantiles import empirical_cdf
from kiwb.core.representation_routing import (
    EnergyRouter,
    KnnRouter,
    MahalanobisRouter,
    Reference,
    RepresentationSettings,
    fit_representation_routers,
)
from kiwb.core.stacked_routing import StackedOwner, fit_stacked_owner


@dataclass(frozen=True)
class TeacherFeatures:
    """One teacher's uncertainty features on n texts, as scoring stored them."""

    mc_confidence: Tensor       # (n,)
    det_confidence: Tensor      # (n,)
    mutual_information: Tensor  # (n,)
    det_logits: Tensor          # (n, C_i)
    mc_probs: Tensor | None = None  # (n, C_i) mean MC-dropout probabilities
    # (n, d) the input of its classifier head on a dropout-off pass, where scoring kept it
    representation: Tensor | None = None

    def confidence(self, use_mc: bool) -> Tensor:
        """The confidence MUKI compares: MC dropout's, or one dropout-off pass's."""
        return self.mc_confidence if use_mc else self.det_confidence

    def margin(self, use_mc: bool) -> Tensor:
        """(n,) float64: how far the top answer is ahead of the second, larger meaning surer:
        the MC log-margin, or without MC the gap between the two top logits (a temperature only
        rescales it, and unlike a confidence it does not saturate at 1 on a sharp teacher)."""
        if use_mc:
            return self.mc_log_margin()
        top_two = self.det_logits.double().topk(2, dim=1).values
        return top_two[:, 0] - top_two[:, 1]

    def mc_log_margin(self) -> Tensor:
        """log p_top - log p_second of the mean MC-dropout probabilities: the MC counterpart of
        the logit margin (passes that disagree pull it down), free of saturation because the
        second probability stays representable when the first rounds to 1."""
        if self.mc_probs is None:
            raise ValueError("the MC log-margin needs the mean MC-dropout probabilities")
        top_two = torch.log(self.mc_probs.double().clamp_min(1e-300)).topk(2, dim=1).values
        return top_two[:, 0] - top_two[:, 1]


# ---- one teacher's router ----------------------------------------------------------------


@dataclass(frozen=True)
class ConfidenceRouter:
    """The teacher's confidence as it is (MUKI)."""

    use_mc: bool
    share: float | None = None

    def scores(self, features: TeacherFeatures) -> Tensor:
        return features.confidence(self.use_mc).double()


@dataclass(frozen=True)
class RankRouter:
    """Empirical CDF of the teacher's confidence over the pool it was fitted on."""

    use_mc: bool
    reference: Tensor  # sorted pool confidences
    share: float | None = None

    def scores(self, features: TeacherFeatures) -> Tensor:
        return empirical_cdf(self.reference, features.confidence(self.use_mc).double())


# A class a teacher says on fewer pool texts than this is ranked against all its texts: a CDF
# over a handful of values is too coarse to say anything.
MIN_CLASS_REFERENCE = 20


@dataclass(frozen=True)
class ClassRankRouter:
    """Empirical CDF of the teacher's confidence among the pool texts it gives the same class.

    A teacher is less sure of a class that is rare or close to another (mail beside net), so
    plain rank routing ranks even its right answers on that class low and sends those texts to
    a teacher that cannot say it. Ranked among its own answers of that class, they keep their
    place."""

    use_mc: bool
    references: tuple[Tensor, ...]  # per class of the teacher: sorted pool confidences
    share: float | None = None

    def scores(self, features: TeacherFeatures) -> Tensor:
        values = features.confidence(self.use_mc).double()
        said = features.det_logits.argmax(dim=1)  # the class the teacher's targets would carry
        found = torch.empty_like(values)
        for label, reference in enumerate(self.references):
            here = said == label
            if bool(here.any()):
                found[here] = empirical_cdf(reference, values[here])
        return found


def fit_class_rank(pool: TeacherFeatures, use_mc: bool,
                   min_reference: int = MIN_CLASS_REFERENCE) -> ClassRankRouter:
    """Per class the teacher says, its sorted pool confidences on the texts it says it on; a
    class said on fewer than `min_reference` texts is read against every pool text."""
    values = pool.confidence(use_mc).double()
    said = pool.det_logits.argmax(dim=1)
    every = values.sort().values
    references = []
    for label in range(pool.det_logits.shape[1]):
        own = values[said == label].sort().values
        references.append(own if len(own) >= min_reference else every)
    return ClassRankRouter(use_mc, tuple(references))


# ---- all teachers -------------------------------------------------------------------------

Router = ConfidenceRouter | RankRouter | ClassRankRouter | MahalanobisRouter | KnnRouter | EnergyRouter


@dataclass(frozen=True)
class FittedRouting:
    """A routing method fitted for N teachers; applies to any texts those teachers scored."""

    name: str
    routers: tuple[Router, ...]
    stack: StackedOwner | None = None   # stacked routing: over the routers' rank scores
    # joint routing: one model over every teacher's representation; the routers are those of
    # the routing whose answers it was fitted on (their references and shares stay readable)
    joint: JointModel | None = None

    @property
    def probabilistic(self) -> bool:
        """Whether the scores estimate a probability (Soft then normalises them rather than
        taking softmax(c / tau), which is MUKI's rule for raw confidences)."""
        return self.name != "confidence"

    def scores(self, features: Sequence[TeacherFeatures]) -> Tensor:
        """(n, N) routing scores in [0, 1]."""
        if len(features) != len(self.routers):
            raise ValueError(f"routing fitted for {len(self.routers)} teachers got {len(features)}")
        if self.joint is not None:
            return self.joint.scores([_representation(f) for f in features])
        scores = torch.stack([router.scores(f) for router, f in zip(self.routers, features,
                                                                     strict=True)], dim=1)
        return self.stack.posterior(scores, features) if self.stack is not None else scores


@dataclass(frozen=True)
class LabeledFeatures:
    """Features of the labeled texts, and each one's class within each teacher's labels."""

    features: Sequence[TeacherFeatures]
    classes: Sequence[Tensor]  # per teacher (n_l,) long: index in Y_i, or -1 outside Y_i


def fit_routing(name: str, pool: Sequence[TeacherFeatures], *, use_mc: bool = True,
                labeled: LabeledFeatures | None = None,
                teacher_names: Sequence[str] | None = None,
                seen: Sequence[Reference | None] | None = None,
                representation: RepresentationSettings | None = None) -> FittedRouting:
    """Fit routing `name`: label-free ones per teacher on the pool, stacked on `labeled`; the
    representation routings on `seen` texts where a teacher has them."""
    if name not in ROUTINGS:
        raise ValueError(f"unknown routing {name!r}; choose one of {', '.join(ROUTINGS)}")
    if name == "joint":
        return _fit_joint(pool, labeled, teacher_names, seen, representation)
    if name in OWN_SCORE_ROUTINGS:
        return FittedRouting(name, fit_representation_routers(
            name, pool, seen, representation or RepresentationSettings(), teacher_names))
    if name in FEW_LABEL_ROUTINGS:
        if labeled is None:
            raise ValueError(f"routing {name!r} needs labeled texts ([data.labeled])")
        return _fit_stacked(pool, labeled, use_mc)
    return FittedRouting(name, tuple(_fit_label_free(name, features, use_mc) for features in pool))


def _fit_stacked(pool: Sequence[TeacherFeatures], labeled: LabeledFeatures,
                 use_mc: bool) -> FittedRouting:
    ranks = [RankRouter(use_mc, features.confidence(use_mc).double().sort().values)
             for features in pool]
    labeled_ranks = torch.stack([router.scores(features) for router, features
                                 in zip(ranks, labeled.features, strict=True)], dim=1)
    owners = torch.stack([classes >= 0 for classes in labeled.classes], dim=1)  # (n_l, N)
    stack = fit_stacked_owner(pool, labeled.features, labeled_ranks, owners, use_mc=use_mc)
    unfitted = FittedRouting("stacked", tuple(ranks), stack=stack)
    shares = unfitted.scores(pool).mean(0)  # what the model expects of the pool, per teacher
    return dataclasses.replace(unfitted, routers=tuple(
        dataclasses.replace(router, share=float(share))
        for router, share in zip(ranks, shares, strict=True)))


def _fit_joint(pool: Sequence[TeacherFeatures], labeled: LabeledFeatures | None,
               teacher_names: Sequence[str] | None, seen: Sequence[Reference | None] | None,
               representation: RepresentationSettings | None) -> FittedRouting:
    """The joint router, fitted on the answers of its base routings on the pool (the mean of
    their quantile scores, argmax), and on labeled texts where there are some."""
    settings = representation or RepresentationSettings()
    bases = [FittedRouting(base, fit_representation_routers(base, pool, seen, settings,
                                                             teacher_names))
             for base in JOINT_BASES]
    votes = torch.stack([base.scores(pool) for base in bases]).mean(0)  # (n, N)
    answers = torch.nn.functional.one_hot(votes.argmax(1), len(pool)).float()
    owners = labeled_reps = None
    if labeled is not None:
        owners = torch.stack([classes >= 0 for classes in labeled.classes], dim=1)  # (n_l, N)
        labeled_reps = [_representation(f) for f in labeled.features]
    model = fit_joint([_representation(f) for f in pool], answers, labeled=labeled_reps,
                      owners=owners)
    shares = model.scores([_representation(f) for f in pool]).mean(0)
    routers = tuple(dataclasses.replace(router, share=float(share))
                    for router, share in zip(bases[0].routers, shares, strict=True))
    return FittedRouting("joint", routers, joint=model)


def _representation(features: TeacherFeatures) -> Tensor:
    if features.representation is None:
        raise ValueError("this routing reads the teacher's representation, which its scores lack")
    return features.representation


def _fit_label_free(name: str, pool: TeacherFeatures, use_mc: bool) -> Router:
    if name == "confidence":
        return ConfidenceRouter(use_mc)
    if name == "rank":
        return RankRouter(use_mc, pool.confidence(use_mc).double().sort().values)
    return fit_class_rank(pool, use_mc)
