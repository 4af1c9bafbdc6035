"""The sequence kind's integration: each text routed to a teacher by its scores, the targets,
their weights and conflicts, and the figures `kiwb integrate` reports (its runtime's `integrate`,
integrate_texts). Its parts also serve the multi-task kind's single-label tasks and the
training of a sequence student (kiwb.kinds.sequence.training)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from kiwb.core import integration as integ
from kiwb.core import routing as routes
from kiwb.core import routing_diagnostics as diagnostics
from kiwb.core.choices import OWN_SCORE_ROUTINGS, READS_REPRESENTATION
from kiwb.core.histograms import unit_histogram
from kiwb.core.labels import (
    coverage_mask,
    gold_label_ids,
    label_positions,
    overlapping_labels,
    union_labels,
)
from kiwb.core.metrics import classification_report
from kiwb.core.routing_check import RoutingCheck, RoutingComparison, check_routing_outcome
from kiwb.errors import ConfigError, DataError
from kiwb.kinds.sequence import KIND
from kiwb.kinds.sequence.routing_choice import is_auto, pick_routing, reads_representation
from kiwb.project.config import ProjectConfig
from kiwb.project.config_schema import DATASET_ROLES
from kiwb.project.fingerprint import settings_key, texts_fingerprint
from kiwb.project.labels import labels_by_hash, labels_fingerprint, text_hash
from kiwb.project.records import (
    ClassFunnel,
    EvalSummary,
    GoldLabelUse,
    IntegrationRecord,
    IntegrationSettings,
    IntegrationSummary,
    RoutingAccuracy,
    RoutingChoice,
    RoutingDetails,
    TeacherRouting,
    teacher_facts,
)
from kiwb.project.store import Store
from kiwb.workers.integration_targets import (
    MadeIntegration,
    made,
    measured_alike,
    read_or_integrate,
    record_made,
)
from kiwb.workers.rare_classes import (
    estimated_prior,
    labeled_class_funnel,
    pool_class_funnel,
    weigh_classes,
)
from kiwb.workers.representation_sets import load_representation, seen_references
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.stored_scores import load_scores

MARGIN_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclass
class TeacherScores:
    """Scores of all teachers on one data set, as tensors, plus the union-label mapping."""

    teachers: list[str]
    teacher_labels: list[tuple[str, ...]]
    labels: list[str]
    positions: list[torch.Tensor]
    coverage: torch.Tensor
    mc_confidence: torch.Tensor   # (n, N)
    det_confidence: torch.Tensor  # (n, N)
    mutual_information: torch.Tensor  # (n, N)
    det_probs: list[torch.Tensor]
    det_logits: list[torch.Tensor]
    mc_probs: list[torch.Tensor]
    true_labels: list[str] | None = None
    score_keys: list[str] = field(default_factory=list)
    # (n, d_i) per teacher: its representation, loaded where the routing reads it
    representations: list[torch.Tensor] | None = None

    def features(self) -> list[routes.TeacherFeatures]:
        """Each teacher's uncertainty features (and representation), as routing reads them."""
        return [routes.TeacherFeatures(self.mc_confidence[:, i], self.det_confidence[:, i],
                                       self.mutual_information[:, i], self.det_logits[i],
                                       self.mc_probs[i],
                                       self.representations[i] if self.representations else None)
                for i in range(len(self.teachers))]

    def labeled_features(self) -> routes.LabeledFeatures:
        """Features of labeled texts with each text's class index in every teacher's labels."""
        true_ids = self.true_label_ids()
        classes = []
        for teacher_positions in self.positions:
            # union index -> index within this teacher's labels, -1 where it has no such label
            within = torch.full((len(self.labels),), -1, dtype=torch.long)
            within[teacher_positions] = torch.arange(len(teacher_positions))
            classes.append(within[true_ids])
        return routes.LabeledFeatures(self.features(), classes)

    def routing_scores(self, fitted: routes.FittedRouting) -> torch.Tensor:
        """(n, N) routing scores of these texts under a fitted routing."""
        return fitted.scores(self.features()).float()

    def true_label_ids(self) -> torch.Tensor | None:
        """The true labels as union indices, refusing labels no teacher knows."""
        if self.true_labels is None:
            return None
        return gold_label_ids(self.true_labels, self.labels)

    def rows(self, index: torch.Tensor, true_labels: list[str] | None = None) -> TeacherScores:
        """The scores of the texts at `index` (with `true_labels`: those texts' labels)."""
        if true_labels is None and self.true_labels is not None:
            true_labels = [self.true_labels[i] for i in index.tolist()]
        return replace(
            self, mc_confidence=self.mc_confidence[index], det_confidence=self.det_confidence[index],
            mutual_information=self.mutual_information[index],
            det_probs=[p[index] for p in self.det_probs],
            det_logits=[p[index] for p in self.det_logits],
            mc_probs=[p[index] for p in self.mc_probs], true_labels=true_labels,
            representations=([p[index] for p in self.representations]
                             if self.representations else None))

    def joined(self, other: TeacherScores) -> TeacherScores:
        """These texts, then `other`'s (same teachers): two labeled sets as one."""
        return replace(
            self, mc_confidence=torch.cat([self.mc_confidence, other.mc_confidence]),
            det_confidence=torch.cat([self.det_confidence, other.det_confidence]),
            mutual_information=torch.cat([self.mutual_information, other.mutual_information]),
            det_probs=[torch.cat(pair) for pair in zip(self.det_probs, other.det_probs, strict=True)],
            det_logits=[torch.cat(pair) for pair in zip(self.det_logits, other.det_logits, strict=True)],
            mc_probs=[torch.cat(pair) for pair in zip(self.mc_probs, other.mc_probs, strict=True)],
            true_labels=list(self.true_labels or []) + list(other.true_labels or []),
            representations=([torch.cat(pair) for pair in zip(self.representations,
                                                               other.representations, strict=True)]
                             if self.representations and other.representations else None))

    def integrate(self, settings: IntegrationSettings,
                  fitted: routes.FittedRouting) -> integ.Integration:
        return integ.integrate(
            settings.method, routing_scores=self.routing_scores(fitted),
            det_probs=self.det_probs, det_logits=self.det_logits, positions=self.positions,
            num_union=len(self.labels), tau=settings.tau, reweight=settings.reweight,
            probabilistic=fitted.probabilistic,
        )


@dataclass(frozen=True)
class GoldLabels:
    """The labels given to pool texts (kiwb.project.labels), by pool row."""

    rows: torch.Tensor       # (m,) pool rows with a label
    label_ids: torch.Tensor  # (m,) their labels as union indices
    left_out: torch.Tensor   # (k,) pool rows marked none of these labels
    by_hash: dict[str, str | None]  # every decision the store holds
    fingerprint: str

    @property
    def decided(self) -> torch.Tensor:
        """Every pool row with a decision, labeled or left out."""
        return torch.cat([self.rows, self.left_out])

    def unlabeled_rows(self, num_texts: int) -> torch.Tensor:
        keep = torch.ones(num_texts, dtype=torch.bool)
        keep[self.decided] = False
        return keep.nonzero().squeeze(1)

    def undecided(self, texts: list[str]) -> torch.Tensor:
        """Rows of `texts` (another data set: the eval set) that carry no decision."""
        return torch.tensor([i for i, text in enumerate(texts)
                             if text_hash(text) not in self.by_hash], dtype=torch.long)


def gold_labels(store: Store, texts: list[str], labels: list[str]) -> GoldLabels:
    """The store's labels on the pool `texts`; a label no teacher knows now is refused."""
    by_hash = labels_by_hash(store.connection)
    index = {label: i for i, label in enumerate(labels)}
    rows, label_ids, left_out = [], [], []
    for row, text in enumerate(texts):
        key = text_hash(text)
        if key not in by_hash:
            continue
        label = by_hash[key]
        if label is None:
            left_out.append(row)
        elif label in index:
            rows.append(row)
            label_ids.append(index[label])
        else:
            raise DataError(
                f"the label {label!r} given to pool text {row} is in no teacher's labels now "
                f"({', '.join(labels)}); label it again in the Conflicts pane, or fix it with "
                "kiwb labels export, edit, kiwb labels import --replace")
    as_tensor = lambda values: torch.tensor(values, dtype=torch.long)  # noqa: E731
    return GoldLabels(as_tensor(rows), as_tensor(label_ids), as_tensor(left_out), by_hash,
                      labels_fingerprint(by_hash))


def labeled_targets(labeled: TeacherScores, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot targets of the labeled texts, weight 1 each. For UHC (one target per teacher),
    every teacher that knows the gold label gets it one-hot; the others keep their own
    prediction, which the gold label says nothing against."""
    true_ids = labeled.true_label_ids()
    one_hot = torch.nn.functional.one_hot(true_ids, len(labeled.labels)).float()  # (n, |Y|)
    if method == "uhc":
        targets = integ.uhc_targets(labeled.det_probs, labeled.positions, len(labeled.labels))
        knows = labeled.coverage[:, true_ids].T  # (n, N)
        targets = torch.where(knows.unsqueeze(2), one_hot.unsqueeze(1), targets)
    else:
        targets = one_hot
    return targets, torch.ones(len(true_ids))


@dataclass
class PoolTargets:
    """An integration of the pool: the routing fitted, the targets, and the labels used."""

    fitted: routes.FittedRouting
    result: integ.Integration
    routing_labels: TeacherScores | None  # the labeled texts the routing was fitted on
    gold: GoldLabels | None
    # (|Y|,) the pool's class mix as the teachers estimate it: the class funnel's est. share
    prior: torch.Tensor | None = None


def integrate_pool(settings: IntegrationSettings, store: Store, scores: TeacherScores,
                   texts: list[str], labeled_file: TeacherScores | None,
                   seen: list | None = None) -> PoolTargets:
    """Fit the routing and integrate the pool's scores; with `settings.labels`, the given
    labels join [data.labeled] in fitting the routing, labeled texts get one-hot targets at
    full weight and texts marked none get weight 0."""
    gold = gold_labels(store, texts, scores.labels) if settings.labels else None
    routing_labels = labeled_file
    if gold is not None and len(gold.rows):
        given = scores.rows(gold.rows, [scores.labels[i] for i in gold.label_ids.tolist()])
        routing_labels = given if routing_labels is None else routing_labels.joined(given)
    fitted = fit_routing(settings, scores, routing_labels, seen)
    result = weigh_classes(settings, scores.integrate(settings, fitted))
    if gold is not None:
        targets, weights = result.targets.clone(), result.weights.clone()
        if len(gold.rows):
            targets[gold.rows] = labeled_targets(given, settings.method)[0]
            weights[gold.rows] = 1.0
        weights[gold.left_out] = 0.0
        result = replace(result, targets=targets, weights=weights)
    return PoolTargets(fitted, result, routing_labels, gold,
                       estimated_prior(scores, fitted, settings))


def fit_routing(settings: IntegrationSettings, pool: TeacherScores,
                labeled: TeacherScores | None, seen: list | None = None) -> routes.FittedRouting:
    """The settings' routing fitted on the pool (label-free) or on the labeled texts; a
    representation routing on each teacher's `seen` texts where it has them."""
    if settings.uses_labels and labeled is None:
        if settings.labels:  # labels were asked for, but none names a class of a pool text
            raise ConfigError(
                f"routing {settings.routing!r} needs labeled texts, and no label given is a "
                "class on a text of the unlabeled data (texts marked none do not count): give "
                "some texts a class in the workbench's Conflicts pane or with kiwb labels import")
        raise ConfigError(
            f"routing {settings.routing!r} needs labeled texts and has none: label some in the "
            "workbench's Conflicts pane or with kiwb labels import, then use --given-labels (or "
            "[integration] labels = true); or add [data.labeled]")
    try:
        return routes.fit_routing(
            settings.routing, pool.features(), use_mc=settings.use_mc,
            labeled=labeled.labeled_features() if settings.reads_labels and labeled else None,
            teacher_names=pool.teachers, seen=seen)
    except ValueError as error:  # a labeled set that cannot calibrate some teacher
        raise DataError(f"routing {settings.routing!r}: {error}") from None


def scores_from_tasks(config: ProjectConfig, store: Store, tasks: list[ScoreTask],
                      representation: bool = False) -> TeacherScores:
    """The teachers' stored scores of one data set (with `representation`, their
    representations too: the representation routings read them)."""
    scores = scores_from_arrays([task.teacher.name for task in tasks],
                                [task.teacher.labels for task in tasks],
                                [load_scores(config, store, task) for task in tasks],
                                tasks[0].table.labels, [task.key for task in tasks])
    if representation:  # kept in float16 as stored: the routings widen it block by block
        scores = replace(scores, representations=[
            torch.from_numpy(load_representation(config, store, task.representation)[
                "representation"]) for task in tasks])
    return scores


def scores_from_arrays(teachers: list[str], label_sets: list, arrays: list[dict],
                       true_labels: list[str] | None, score_keys: list[str]) -> TeacherScores:
    """Teachers' stored (n, C_i) arrays as TeacherScores on the union of their labels."""
    labels = union_labels(label_sets)

    def stack(name: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([a[name] for a in arrays], axis=1))  # (n, N)

    return TeacherScores(
        teachers=list(teachers), teacher_labels=label_sets,
        labels=labels, positions=label_positions(label_sets, labels),
        coverage=coverage_mask(label_sets, labels),
        mc_confidence=stack("mc_confidence"), det_confidence=stack("det_confidence"),
        mutual_information=stack("mutual_information"),
        det_probs=[torch.from_numpy(a["det_probs"]) for a in arrays],
        det_logits=[torch.from_numpy(a["det_logits"]) for a in arrays],
        mc_probs=[torch.from_numpy(a["mc_probs"]) for a in arrays],
        true_labels=true_labels, score_keys=list(score_keys),
    )


def summarize(scores: TeacherScores, pool: PoolTargets,
              settings: IntegrationSettings) -> IntegrationSummary:
    """Counts per winning teacher, the margin distribution, the conflicting texts and what the
    routing estimated per teacher; a pool with gold labels is measured on the texts without a
    given label (the routing was fitted on those)."""
    threshold = settings.conflict_threshold
    result, fitted = pool.result, pool.fitted
    margin = result.margin.numpy()
    wins = torch.bincount(result.routed, minlength=len(scores.teachers)).tolist()
    measured = scores if pool.gold is None else scores.rows(pool.gold.unlabeled_rows(len(margin)))
    true_ids = measured.true_label_ids()
    labeled_pool = true_ids is not None
    routing, routed = routing_diagnostics(scores, result, settings, fitted, pool.routing_labels)
    return IntegrationSummary(
        num_texts=int(margin.shape[0]),
        per_teacher=teacher_facts(
            scores.teachers, scores.score_keys, wins, labels=scores.teacher_labels,
            accuracy=teacher_accuracies(measured, true_ids) if labeled_pool else None,
            routing=routed),
        labels=scores.labels,
        overlapping_labels=overlapping_labels(scores.teacher_labels),
        margin_quantiles={str(q): float(np.quantile(margin, q)) for q in MARGIN_QUANTILES},
        margin_histogram=unit_histogram(margin),
        conflict_threshold=threshold,
        conflicts=int((margin < threshold).sum()),
        routing=routing,
        routing_accuracy=(RoutingAccuracy(**routing_accuracies(measured, true_ids, fitted))
                          if labeled_pool else None),
        ensemble_accuracy=ensemble_accuracy(measured) if labeled_pool else None,
        teachers_kind=KIND.name,
    )


def routing_check(scores: TeacherScores, pool: PoolTargets, settings: IntegrationSettings,
                  accuracy: RoutingAccuracy | None, num_labeled: int,
                  where: str = "eval") -> RoutingCheck:
    """kiwb.core.routing_check's verdict on a pool's routing: did it starve a teacher, and
    (`accuracy` on `num_labeled` labeled texts) does it route much worse than MC confidence?"""
    num_teachers = len(scores.teachers)
    wins = torch.bincount(pool.result.routed, minlength=num_teachers).tolist()
    mc_wins = torch.bincount(scores.mc_confidence.argmax(1), minlength=num_teachers)
    mc_shares = (mc_wins.double() / max(1, len(scores.mc_confidence))).tolist()
    expected = {}
    for name, mc_share, router in zip(scores.teachers, mc_shares, pool.fitted.routers, strict=True):
        # The routing's own estimate of the texts in a teacher's labels counts too.
        expected[name] = max(mc_share, router.share or 0.0)
    comparison = None  # MC confidence's own routing needs no comparison with itself
    if (accuracy is not None and accuracy.chosen is not None
            and (settings.routing != "confidence" or not settings.use_mc)):
        comparison = RoutingComparison(accuracy.chosen, accuracy.mc_dropout, num_labeled, where)
    given = len(pool.routing_labels.true_labels) if pool.routing_labels is not None else 0
    return check_routing_outcome(
        settings.routing, dict(zip(scores.teachers, wins, strict=True)), expected,
        uses_labels=settings.uses_labels, use_mc=settings.use_mc, labels_given=given,
        comparison=comparison)


def class_funnel_of(scores: TeacherScores, pool: PoolTargets, settings: IntegrationSettings,
                    eval_scores: TeacherScores | None) -> ClassFunnel:
    """Where each class goes in the pool's integration, with the recall steps on the eval set
    (or, without one, on a labeled pool's texts that carry no given label)."""
    funnel = pool_class_funnel(scores, pool.result, pool.prior)
    if eval_scores is not None:
        labeled = labeled_class_funnel(eval_scores, eval_scores.integrate(settings, pool.fitted),
                                       "eval")
    elif scores.true_labels is not None:
        rows = (pool.gold.unlabeled_rows(len(scores.true_labels)) if pool.gold is not None
                else torch.arange(len(scores.true_labels)))
        labeled = labeled_class_funnel(
            scores.rows(rows), replace(pool.result, routed=pool.result.routed[rows],
                                       targets=pool.result.targets[rows]),
            "the unlabeled texts' own labels")
    else:
        return funnel
    return replace(funnel, labeled=labeled)


def eval_summary(eval_scores: TeacherScores, fitted: routes.FittedRouting) -> EvalSummary:
    """The untrained references on the eval set: routing, the Ensemble, each teacher alone."""
    true_ids = eval_scores.true_label_ids()
    return EvalSummary(
        num_texts=len(eval_scores.true_labels or []),
        routing_accuracy=RoutingAccuracy(**routing_accuracies(eval_scores, true_ids, fitted)),
        ensemble_accuracy=ensemble_accuracy(eval_scores),
        teacher_accuracy=teacher_accuracies(eval_scores, true_ids),
        confidence_histograms=confidence_histograms(eval_scores),
        measured_on=eval_inputs(eval_scores),
    )


def eval_inputs(eval_scores: TeacherScores) -> str:
    """What eval figures are measured on, as one key: the eval scores and their gold labels."""
    return settings_key({"scores": eval_scores.score_keys,
                         "labels": texts_fingerprint(eval_scores.true_labels or [])})


def routing_diagnostics(scores: TeacherScores, result: integ.Integration,
                        settings: IntegrationSettings, fitted: routes.FittedRouting,
                        labeled: TeacherScores | None
                        ) -> tuple[RoutingDetails, dict[str, TeacherRouting]]:
    """The routing's details, and per teacher: the estimated share of texts in its labels, its
    confidence over the pool split into texts routed to it and elsewhere with the threshold
    between them, and, with a labeled set, its calibration error on its own labels."""
    teachers = {}
    calibration = calibration_errors(labeled) if labeled is not None else {}
    # a representation routing's own score: the confidence is not what it compared
    own_scores = scores.routing_scores(fitted) if fitted.name in OWN_SCORE_ROUTINGS else None
    for number, (name, router) in enumerate(zip(scores.teachers, fitted.routers, strict=True)):
        values = (own_scores if own_scores is not None else
                  scores.mc_confidence if settings.use_mc else scores.det_confidence)[:, number]
        here = result.routed == number
        teachers[name] = TeacherRouting(
            share=router.share,
            split=diagnostics.routing_split(values, here),
            histogram_here=unit_histogram(values[here]),
            histogram_elsewhere=unit_histogram(values[~here]),
            **calibration.get(name, {}),
            reference=reference_text(router),
        )
    return RoutingDetails(name=settings.routing,
                          labeled_texts=len(labeled.true_labels) if labeled is not None else 0,
                          score=SCORE_NAMES.get(fitted.name) if own_scores is not None else None
                          ), teachers


# What a representation routing's per-teacher histograms count
SCORE_NAMES = {"mahalanobis": "Mahalanobis quantile", "knn": "kNN similarity quantile",
               "energy": "energy quantile", "joint": "joint model's probability"}


def reference_text(router) -> str | None:
    """Where a representation router's class means (or neighbours) came from, in words."""
    source = getattr(router, "source", None)
    if source is None:
        return None
    first, refitted = source.split(",")[0], source.endswith("refitted")
    if refitted:
        return f"{first}, then refitted on the {router.texts:,} pool texts routed to it"
    if first == "seen":
        return f"seen: {router.texts:,} of its training texts"
    return f"seeded: the {router.texts:,} pool texts it is surest of per class"


def calibration_errors(labeled: TeacherScores) -> dict[str, dict]:
    """Each teacher's expected calibration error on the labeled texts of its own labels."""
    found = {}
    label_info = labeled.labeled_features()
    for number, name in enumerate(labeled.teachers):
        inside = label_info.classes[number] >= 0
        if not bool(inside.any()):
            continue
        logits, classes = labeled.det_logits[number][inside].double(), label_info.classes[number][inside]
        entry = {"calibration_error": diagnostics.expected_calibration_error(logits.softmax(1), classes),
                 "labeled_own": int(inside.sum())}
        found[name] = entry
    return found


def teacher_accuracies(scores: TeacherScores, true_ids: torch.Tensor) -> dict[str, float]:
    """Each teacher alone over the union labels (it can only be right on its own labels)."""
    return {
        name: float((scores.positions[i][probs.argmax(-1)] == true_ids).float().mean())
        for i, (name, probs) in enumerate(zip(scores.teachers, scores.det_probs, strict=True))
    }


def routing_accuracies(scores: TeacherScores, true_ids: torch.Tensor,
                       fitted: routes.FittedRouting | None = None) -> dict:
    """How often the top-scored teacher knows the true label: MC vs plain confidence, and the
    chosen routing."""
    found = {
        "mc_dropout": integ.routing_accuracy(scores.mc_confidence, true_ids, scores.coverage),
        "plain_confidence": integ.routing_accuracy(scores.det_confidence, true_ids, scores.coverage),
    }
    if fitted is not None:
        found["chosen"] = integ.routing_accuracy(scores.routing_scores(fitted), true_ids,
                                                 scores.coverage)
    return found


def confidence_histograms(scores: TeacherScores) -> dict[str, dict[str, list[int]]]:
    """The paper's figure 2: confidence of the right vs the wrong teacher, MC vs plain confidence.

    A teacher is "right" for a text when its label set holds the text's gold label.
    """
    true_ids = scores.true_label_ids()
    covers = scores.coverage[:, true_ids].T  # (n, N): teacher i knows text x's gold label
    result = {}
    for name, confidences in (("mc_dropout", scores.mc_confidence), ("plain_confidence", scores.det_confidence)):
        result[name] = {
            side: unit_histogram(confidences[mask])
            for side, mask in (("right_teacher", covers), ("wrong_teacher", ~covers))
        }
    return result


def ensemble_predictions(scores: TeacherScores) -> torch.Tensor:
    """The untrained Ensemble baseline's label ids (softmax over concatenated logits)."""
    probs = integ.concatenated_logit_probs(scores.det_logits, scores.positions, len(scores.labels))
    return probs.argmax(-1)


def ensemble_accuracy(scores: TeacherScores) -> float | None:
    """Accuracy of the untrained Ensemble baseline."""
    true_ids = scores.true_label_ids()
    if true_ids is None:
        return None
    return float((ensemble_predictions(scores) == true_ids).float().mean())


def ensemble_reference(scores: TeacherScores) -> dict | None:
    """The Ensemble's accuracy and per-class accuracy on labeled scores: what a student that
    has learned should reach (kiwb.core.learning_check compares them)."""
    true_ids = scores.true_label_ids()
    if true_ids is None:
        return None
    report = classification_report(ensemble_predictions(scores), true_ids, scores.labels)
    return {"accuracy": report["accuracy"], "per_class": report["per_class_accuracy"]}


def save_instances(store: Store, key: str, scores: TeacherScores, result: integ.Integration,
                   texts: list[str]) -> None:
    """One row per text for the conflicts list: margin, winner, target class, confidences."""
    from kiwb.project.instances import replace_instances

    target_ids = result.targets if result.targets.dim() == 2 else result.targets.sum(1)
    target_ids = target_ids.argmax(-1).tolist()
    true_ids = scores.true_label_ids()
    gold = true_ids.tolist() if true_ids is not None else [None] * len(texts)
    confidences = result.confidences.tolist()
    rows = zip(range(len(texts)), result.margin.tolist(), result.routed.tolist(), target_ids,
               gold, confidences, texts, strict=True)
    replace_instances(store.connection, key, rows)


def labeled_file_scores(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                        tasks: list[ScoreTask]) -> TeacherScores | None:
    """The scores of [data.labeled] when the routing reads labels (label-free routing does
    not wait for them), with the teachers' representations where it reads those too."""
    if not settings.reads_labels or not tasks:
        return None
    return scores_from_tasks(config, store, tasks, settings.routing in READS_REPRESENTATION)


def without_given_labels(scores: TeacherScores, texts: list[str],
                         gold: GoldLabels | None) -> tuple[TeacherScores, int]:
    """An eval set less the texts that carry a given label (the routing and the student learnt
    them), and how many were left out."""
    if gold is None:
        return scores, 0
    keep = gold.undecided(texts)
    return scores.rows(keep), len(texts) - len(keep)


@dataclass
class IntegrationInputs:
    """What an integration of the pool reads, loaded once. `kiwb integrate` and a training run
    load the same inputs, so the run finds the integration it would make by its key."""

    asked: IntegrationSettings  # as the job was given it: "auto" stays "auto" in record and key
    reads: bool                 # the routing reads the teachers' representations
    scores: TeacherScores
    texts: list[str]
    labeled: TeacherScores | None      # [data.labeled], where the routing reads labels
    seen: list | None                  # each teacher's seen texts (representation routings)
    seen_keys: dict
    gold: GoldLabels | None            # the labels given to pool texts (settings.labels)
    eval_scores: TeacherScores | None  # less the texts with a given label
    eval_left_out: int
    for_choice: TeacherScores | None   # [data.labeled] where "auto" measures on it
    representation_keys: list[str]

    def key(self, choice: RoutingChoice | None) -> str:
        """The integration's key: every input that decides its targets, with what "auto"
        chose (a choice is made from the inputs, so only the one made from them matches)."""
        used = {"scores": self.scores.score_keys, **self.asked.keyed()}
        if self.labeled is not None:  # the labels decide the routing as much as the settings do
            used["labeled_scores"] = self.labeled.score_keys
        if choice is not None:  # and so does what "auto" chose, from the labeled texts it read
            used["routing_choice"] = choice.to_dict()
        if self.reads:  # and so do the representations it read
            used["representations"] = self.representation_keys
            used["seen"] = self.seen_keys
        if self.gold is not None:
            used["gold_labels"] = self.gold.fingerprint
        return settings_key(used)


def integration_inputs(config: ProjectConfig, store: Store, asked: IntegrationSettings,
                       tasks: list[ScoreTask]) -> IntegrationInputs:
    """The stored scores, labels and representations an integration with `asked` reads."""
    by_role = {role: [t for t in tasks if t.dataset == role] for role in DATASET_ROLES}
    reads = reads_representation(asked, store, tasks)
    scores = scores_from_tasks(config, store, by_role["unlabeled"], reads)
    texts = by_role["unlabeled"][0].table.texts
    seen, seen_keys = (seen_references(config, store, [t.teacher for t in by_role["unlabeled"]])
                       if reads else (None, {}))
    gold = gold_labels(store, texts, scores.labels) if asked.labels else None
    eval_scores, eval_left_out = None, 0
    if by_role["eval"]:
        eval_scores, eval_left_out = without_given_labels(
            scores_from_tasks(config, store, by_role["eval"], reads),
            by_role["eval"][0].table.texts, gold)
    return IntegrationInputs(
        asked=asked, reads=reads, scores=scores, texts=texts,
        labeled=labeled_file_scores(config, store, asked, by_role["labeled"]),
        seen=seen, seen_keys=seen_keys, gold=gold, eval_scores=eval_scores,
        eval_left_out=eval_left_out,
        for_choice=labeled_scores_for_choice(config, store, asked, by_role, reads),
        representation_keys=[t.representation.key for t in by_role["unlabeled"]] if reads else [])


def integrate_texts(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                    tasks: list[ScoreTask]) -> IntegrationRecord:
    """The sequence kind's integrate: texts routed, targets, conflicts, figures."""
    return integrate_inputs(config, store, integration_inputs(config, store, settings, tasks))


def integrate_inputs(config: ProjectConfig, store: Store,
                     inputs: IntegrationInputs) -> IntegrationRecord:
    """Integrate loaded inputs and record it: the summary, the conflicts list and the targets
    a training run reads back (kiwb.workers.integration_targets)."""
    return record_made(config.root, store, integration_made(store, inputs))


def integration_made(store: Store, inputs: IntegrationInputs) -> MadeIntegration:
    """Integrate loaded inputs: the record, the targets and the conflicts list to come."""
    asked, scores, labeled = inputs.asked, inputs.scores, inputs.labeled
    eval_scores = inputs.eval_scores
    settings, choice = pick_routing(asked, scores, eval_scores, inputs.for_choice, inputs.gold,
                                    inputs.seen, inputs.reads)
    pool = integrate_pool(settings, store, scores, inputs.texts, labeled, inputs.seen)
    summary = summarize(scores, pool, settings)
    if eval_scores is not None:
        summary = replace(summary, eval=eval_summary(eval_scores, pool.fitted))
    summary = replace(summary, funnel=class_funnel_of(scores, pool, settings, eval_scores),
                      routing_choice=choice)
    if pool.gold is not None:
        gold = pool.gold
        summary = replace(summary, gold_labels=GoldLabelUse(
            labeled=len(gold.rows), left_out=len(gold.left_out),
            routing_labels=len(pool.routing_labels.true_labels) if pool.routing_labels else 0,
            eval_left_out=inputs.eval_left_out, fingerprint=gold.fingerprint))
    if summary.eval is not None:
        check = routing_check(scores, pool, settings, summary.eval.routing_accuracy,
                              summary.eval.num_texts)
    else:  # a labeled pool is measured on its texts without a given label
        measured = summary.num_texts - (len(pool.gold.decided) if pool.gold is not None else 0)
        check = routing_check(scores, pool, settings, summary.routing_accuracy, measured,
                              where="the unlabeled texts' own labels")
    summary = replace(summary, check=check)
    key = inputs.key(choice)
    targets = {"targets": pool.result.targets, "weights": pool.result.weights}
    if labeled is not None:  # the few labels of [data.labeled] also teach, at full weight
        targets["labeled_targets"], targets["labeled_weights"] = labeled_targets(
            labeled, settings.method)
    return made(key, asked, summary, targets,
                lambda store: save_instances(store, key, scores, pool.result, inputs.texts))


def stored_integration(config: ProjectConfig, store: Store, asked: IntegrationSettings,
                       tasks: list[ScoreTask], eval_unfinished: bool = False
                       ) -> tuple[IntegrationRecord, IntegrationInputs, dict[str, torch.Tensor]]:
    """The integration `kiwb integrate` recorded for these inputs and its targets, found by
    its key (worked out the same way where there is none). `eval_unfinished`: the eval set is
    left out of `tasks` until it is scored."""
    inputs = integration_inputs(config, store, asked, tasks)
    measured_on = eval_inputs(inputs.eval_scores) if inputs.eval_scores is not None else None
    candidates = (record for record in map(IntegrationRecord.from_dict,
                                           store.integrations_asked(asked.to_dict()))
                  if record.key == inputs.key(record.summary.routing_choice)
                  and measured_alike(record, measured_on, eval_unfinished))
    record, targets = read_or_integrate(config.root, candidates, len(inputs.texts),
                                        lambda: integration_made(store, inputs))
    return record, inputs, targets


def labeled_scores_for_choice(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                              by_role: dict, reads: bool) -> TeacherScores | None:
    """[data.labeled]'s scores where "auto" measures the routings on them (a label-free
    routing reads them for nothing else: they train only with a few-label routing)."""
    if not is_auto(settings) or not by_role["labeled"]:
        return None
    return scores_from_tasks(config, store, by_role["labeled"], reads)
