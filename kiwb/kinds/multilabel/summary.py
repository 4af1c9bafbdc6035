"""What a multi-label integration found, in the shared records: the (text, shared label) pairs
each teacher won, their margins, the conflicts (owners that disagree), the decisions on shared
labels against gold and the untrained references (each teacher alone, the owners' mean)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from kiwb.core.histograms import unit_histogram
from kiwb.kinds.multilabel.integration import THRESHOLD
from kiwb.kinds.multilabel.metrics import multilabel_report
from kiwb.kinds.multilabel.pool import LabelScores, integrate_label_scores
from kiwb.kinds.multilabel.stored_pool import LabelData, LabelPool, pair_text
from kiwb.kinds.multilabel.thresholds import decide
from kiwb.project.instances import replace_instances
from kiwb.project.records import (
    EvalSummary,
    IntegrationSettings,
    IntegrationSummary,
    RoutingAccuracy,
    RoutingDetails,
    TeacherRouting,
    teacher_facts,
)
from kiwb.project.store import Store

MARGIN_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
# The untrained union of the teachers that the students are compared with: each label's
# owners' mean probability (one owner: its own), decided at 0.5.
ENSEMBLE = "mean"


def _shared_pairs(scores: LabelScores, values: torch.Tensor) -> torch.Tensor:
    """The (n, L) `values` at the shared labels, flattened: what routing decides."""
    return values[:, scores.shared].flatten()


def routing_details(data: LabelData, pool: LabelPool, settings: IntegrationSettings
                    ) -> tuple[RoutingDetails, dict[str, TeacherRouting]]:
    """The routing's details, and per teacher its confidence on the shared-label pairs routed
    to it and elsewhere."""
    scores = data.scores
    confidence = scores.mc_confidence if settings.use_mc else scores.det_confidence
    teachers = {}
    for number, name in enumerate(data.teachers):
        owned = scores.shared & scores.owners[number]
        values = confidence[number][:, owned].flatten()
        here = (pool.result.routed[:, owned] == number).flatten()
        teachers[name] = TeacherRouting(
            share=None, split=None,
            histogram_here=unit_histogram(values[here]), histogram_elsewhere=unit_histogram(values[~here]))
    return RoutingDetails(name=settings.routing, labeled_texts=0), teachers


def shared_decisions_right(data: LabelData, targets: torch.Tensor) -> float | None:
    """How often the decision (target > 0.5) on a shared label matches the gold label."""
    if data.gold is None or not data.scores.shared.any():
        return None
    decided = (targets > THRESHOLD)[:, data.scores.shared]
    return float((decided == data.gold[:, data.scores.shared].bool()).double().mean())


def eval_figures(evaluation: LabelData, settings: IntegrationSettings) -> tuple[EvalSummary, dict]:
    """Untrained references on the eval set: micro F1 of the owners' mean (the Ensemble, in the
    `accuracy` fields), of each teacher alone (no on labels it does not own) and of the
    targets; how often shared labels are decided right, by MC confidence, plain confidence
    and the settings' method."""
    scores = evaluation.scores

    def report(probs: torch.Tensor) -> dict:
        return multilabel_report(evaluation.gold, decide(probs), scores.union)

    def integrated(method: str, use_mc: bool) -> torch.Tensor:
        return integrate_label_scores(scores, method, use_mc=use_mc,
                                      with_transfer=bool(settings.transfer), tau=settings.tau,
                                      reweight=settings.reweight).targets

    ensemble = report(integrated(ENSEMBLE, settings.use_mc))
    chosen = integrated(settings.method, settings.use_mc)
    targets = report(chosen)
    alone = {name: report(scores.det_probs[number] * scores.owners[number])["micro_f1"]
             for number, name in enumerate(evaluation.teachers)}
    routing = None
    if scores.shared.any():
        routing = RoutingAccuracy(
            mc_dropout=shared_decisions_right(evaluation, integrated("muki-hard", True)),
            plain_confidence=shared_decisions_right(evaluation, integrated("muki-hard", False)),
            chosen=shared_decisions_right(evaluation, chosen))
    summary = EvalSummary(num_texts=len(evaluation.texts), routing_accuracy=routing,
                          ensemble_accuracy=ensemble["micro_f1"], teacher_accuracy=alone)
    extra = {"ensemble": _figures(ensemble), "targets": _figures(targets)}
    return summary, extra


def _figures(report: dict) -> dict:
    return {name: report[name] for name in ("micro_f1", "macro_f1", "hamming_loss",
                                            "subset_accuracy", "per_label_f1")}


def label_summary(data: LabelData, pool: LabelPool, settings: IntegrationSettings,
                  evaluation: LabelData | None) -> IntegrationSummary:
    """The integration summary of a multi-label pool: texts as a sequence pool's, wins and
    margins over the (text, shared label) pairs, conflicts where owners disagree."""
    scores, result = data.scores, pool.result
    margin = _shared_pairs(scores, result.margin)
    margin_values = margin.numpy() if len(margin) else np.zeros(1)
    wins = torch.bincount(_shared_pairs(scores, result.routed), minlength=len(data.teachers))
    confidence = scores.mc_confidence if settings.use_mc else scores.det_confidence
    # each teacher's confidence on each label it owns, over the pool's texts
    own = {name: {"label_histograms": {label: unit_histogram(confidence[number][:, column])
                                       for column, label in enumerate(data.union)
                                       if scores.owners[number, column]}}
           for number, name in enumerate(data.teachers)}
    details = {"texts": len(data.texts), "labels": len(data.union),
               "confidence": "MC dropout" if settings.use_mc else "plain",
               "shared_labels": [label for label, shared in
                                 zip(data.union, scores.shared.tolist(), strict=True) if shared],
               "disagreements": len(pool.conflicts), "labeled_pairs": len(pool.given),
               "transfer": bool(settings.transfer)}
    routing, routed = routing_details(data, pool, settings)
    summary = IntegrationSummary(
        num_texts=len(data.texts),
        per_teacher=teacher_facts(data.teachers, data.score_keys, wins.tolist(),
                                  labels=data.label_sets, routing=routed, own=own),
        labels=data.union, overlapping_labels=details["shared_labels"],
        margin_quantiles={str(q): float(np.quantile(margin_values, q)) for q in MARGIN_QUANTILES},
        margin_histogram=unit_histogram(margin_values),
        conflict_threshold=settings.conflict_threshold,
        conflicts=sum(c.margin < settings.conflict_threshold for c in pool.conflicts),
        routing=routing,
        teachers_kind="multi-label", details=details)
    if evaluation is not None and evaluation.gold is not None:
        eval_summary, extra = eval_figures(evaluation, settings)
        summary = replace(summary, eval=eval_summary, details={**details, "eval": extra})
    return summary


def save_conflicts(store: Store, key: str, data: LabelData, pool: LabelPool) -> None:
    """One conflicts-list row per (text, shared label) pair whose owners disagree, its text
    "[label] text": its margin, the owner that decided it, the label as its class, and what
    each owner said."""
    column = {label: i for i, label in enumerate(data.union)}
    rows = []
    for number, conflict in enumerate(pool.conflicts):
        label = column[conflict.label]
        gold = None
        if data.gold is not None:
            gold = bool(data.gold[conflict.text, label])
        owners = [t for t in range(len(data.teachers)) if data.scores.owners[t, label]]
        details = {
            "label": conflict.label, "decided": "yes" if conflict.target > THRESHOLD else "no",
            "target": conflict.target, "says_yes": conflict.says_yes, "gold": gold,
            "owners": [data.teachers[t] for t in owners],
            "probs": [float(data.scores.det_probs[t, conflict.text, label]) for t in owners],
            "mc": [float(data.scores.mc_confidence[t, conflict.text, label]) for t in owners],
            "plain": [float(data.scores.det_confidence[t, conflict.text, label]) for t in owners],
            # what the conflicts list reads as each teacher's score (non-owners: none)
            "scores": [float(data.scores.mc_confidence[t, conflict.text, label])
                       if data.scores.owners[t, label] else 0.0
                       for t in range(len(data.teachers))]}
        rows.append((number, conflict.margin, int(pool.result.routed[conflict.text, label]),
                     label, label if gold else None, details,
                     pair_text(conflict.label, data.texts[conflict.text])))
    replace_instances(store.connection, key, rows)
