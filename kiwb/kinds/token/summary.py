"""What a token integration found, in the shared records: clusters won per teacher, margins,
the conflicts, routing per gold entity and entity F1 on the eval set, the class funnel."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import torch

from kiwb.core import routing_diagnostics as diagnostics
from kiwb.core.histograms import unit_histogram
from kiwb.core.routing_check import check_routing_outcome
from kiwb.kinds.token.funnel import token_funnel
from kiwb.kinds.token.integration import cluster_features, decode_all, integrate_words
from kiwb.kinds.token.metrics import entity_report, entity_spans
from kiwb.kinds.token.stored_pool import (
    OUTSIDE_CLASS,
    TokenData,
    TokenPool,
    cluster_scores,
    target_tags,
    teacher_tags,
)
from kiwb.kinds.token.tags import spans_to_tags
from kiwb.project.fingerprint import settings_key, texts_fingerprint
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


def routing_details(data: TokenData, pool: TokenPool, settings: IntegrationSettings
                    ) -> tuple[RoutingDetails, dict[str, TeacherRouting]]:
    """The routing's details, and per teacher its confidence on the clusters routed to it and
    elsewhere, with the threshold between them."""
    teachers = {}
    for number, (name, router) in enumerate(zip(data.teachers, pool.fitted.routers, strict=True)):
        features = pool.features[number]
        values = features.mc_confidence if settings.use_mc else features.det_confidence
        here = pool.result.routed == number
        teachers[name] = TeacherRouting(
            share=router.share,
            split=diagnostics.routing_split(values, here) if len(values) else None,
            histogram_here=unit_histogram(values[here]), histogram_elsewhere=unit_histogram(values[~here]))
    return RoutingDetails(name=settings.routing, labeled_texts=0), teachers


def gold_clusters(evaluation: TokenData, decoded) -> list[tuple[str, int | None]]:
    """Every gold entity of the eval set: its type and the first cluster overlapping it."""
    by_text: dict[int, list[tuple[int, int, int]]] = {}
    for number, (cluster, text) in enumerate(zip(decoded.clusters, decoded.text_of.tolist(),
                                                 strict=True)):
        by_text.setdefault(text, []).append((cluster.start, cluster.end, number))
    found = []
    for text, tags in enumerate(evaluation.gold):
        for start, end, entity_type in entity_spans(tags, strict=False):
            overlapping = [number for s, e, number in by_text.get(text, []) if s < end and start < e]
            found.append((entity_type, overlapping[0] if overlapping else None))
    return found


def routing_per_entity(evaluation: TokenData, decoded, chosen: torch.Tensor,
                       features) -> dict:
    """How often each routing sent a gold entity's cluster to a teacher that knows its type,
    over the gold entities some teacher's span touches (the others no routing can fix)."""
    gold = gold_clusters(evaluation, decoded)
    reached = [(entity_type, number) for entity_type, number in gold if number is not None]
    owners = [set(tag_set.types) for tag_set in evaluation.tag_sets]

    def right(scores: torch.Tensor) -> float | None:
        if not reached:
            return None
        routed = scores.argmax(1)
        return sum(entity_type in owners[int(routed[number])]
                   for entity_type, number in reached) / len(reached)

    mc = torch.stack([f.mc_confidence for f in features], dim=1)
    plain = torch.stack([f.det_confidence for f in features], dim=1)
    return {"chosen": right(chosen), "mc_dropout": right(mc), "plain_confidence": right(plain),
            "gold_entities": len(gold), "touched": len(reached)}


def eval_figures(evaluation: TokenData, pool: TokenPool,
                 settings: IntegrationSettings) -> tuple[EvalSummary, dict]:
    """Untrained references on the eval set: entity F1 of the Ensemble (its headline figure in
    the `accuracy` fields), of each teacher alone and of the targets; routing per entity."""
    decoded = decode_all(evaluation.scores)
    features = cluster_features(evaluation.scores, decoded)
    chosen = cluster_scores(pool.fitted, features)

    def f1_of(tags) -> dict:
        return entity_report(evaluation.gold, tags, evaluation.types)

    options = {"tau": settings.tau, "reweight": settings.reweight,
               "probabilistic": pool.fitted.probabilistic}
    ensemble = f1_of(target_tags(evaluation, integrate_words(
        "vanilla-kd", evaluation.scores, decoded, chosen, **options)))
    targets = f1_of(target_tags(evaluation, integrate_words(
        settings.method, evaluation.scores, decoded, chosen, **options)))
    alone = {name: f1_of(teacher_tags(evaluation, decoded, number))["f1"]
             for number, name in enumerate(evaluation.teachers)}
    routing = routing_per_entity(evaluation, decoded, chosen, features)
    accuracy = RoutingAccuracy(mc_dropout=routing["mc_dropout"] or 0.0,
                               plain_confidence=routing["plain_confidence"] or 0.0,
                               chosen=routing["chosen"])
    summary = EvalSummary(num_texts=evaluation.scores.num_texts, routing_accuracy=accuracy,
                          ensemble_accuracy=ensemble["f1"], teacher_accuracy=alone,
                          measured_on=eval_inputs(evaluation))
    extra = {"ensemble": _figures(ensemble), "targets": _figures(targets),
             "gold_entities": routing["gold_entities"], "entities_touched": routing["touched"]}
    return summary, extra


def eval_inputs(evaluation: TokenData) -> str:
    """What eval figures are measured on, as one key: the data set's scores and gold tags."""
    return settings_key({"scores": evaluation.score_keys, "labels": texts_fingerprint(
        ["\x1f".join(tags) for tags in evaluation.gold or []])})


def _figures(report: dict) -> dict:
    return {"f1": report["f1"], "strict_f1": report["strict"]["f1"],
            "per_type": {t: v["f1"] for t, v in report["per_type"].items()}}


def token_summary(data: TokenData, pool: TokenPool, settings: IntegrationSettings,
                  evaluation: TokenData | None) -> IntegrationSummary:
    """The integration summary of a token pool: clusters stand where a sequence pool's texts
    do (wins, margins, conflicts); `token` holds what only this kind has."""
    result = pool.result
    margin = result.margin.numpy() if len(result.margin) else np.zeros(1)
    wins = torch.bincount(result.routed, minlength=len(data.teachers)).tolist()
    kinds = Counter(cluster.kind for cluster in pool.decoded.clusters)
    token = {"texts": data.scores.num_texts, "words": int(data.scores.offsets[-1]),
             "clusters": len(pool.decoded.clusters), "cluster_kinds": dict(kinds),
             "labeled_clusters": len(pool.given), "windowed_texts": data.windowed_texts or {}}
    routing, routed = routing_details(data, pool, settings)
    summary = IntegrationSummary(
        num_texts=len(pool.decoded.clusters),
        per_teacher=teacher_facts(data.teachers, data.score_keys, wins,
                                  labels=[tag_set.types for tag_set in data.tag_sets],
                                  routing=routed),
        labels=data.classes, overlapping_labels=_shared_types(data),
        margin_quantiles={str(q): float(np.quantile(margin, q)) for q in MARGIN_QUANTILES},
        margin_histogram=unit_histogram(margin),
        conflict_threshold=settings.conflict_threshold,
        conflicts=int((result.margin < settings.conflict_threshold).sum()),
        routing=routing,
        teachers_kind="token", token=token)
    eval_scores = None
    if evaluation is not None:
        eval_summary, extra = eval_figures(evaluation, pool, settings)
        summary = replace(summary, eval=eval_summary, token={**token, "eval": extra})
        eval_scores = evaluation
    summary = replace(summary, funnel=token_funnel(data, pool, settings, eval_scores),
                      check=_routing_check(data, pool, settings, summary))
    return summary


def _shared_types(data: TokenData) -> list[str]:
    counts = Counter(t for tag_set in data.tag_sets for t in set(tag_set.types))
    return [t for t in data.types if counts[t] > 1]


def _routing_check(data: TokenData, pool: TokenPool, settings, summary: IntegrationSummary):
    mc = torch.stack([f.mc_confidence for f in pool.features], dim=1)
    mc_wins = torch.bincount(mc.argmax(1), minlength=len(data.teachers)) if len(mc) else None
    total = max(1, len(pool.decoded.clusters))
    expected = {name: (float(mc_wins[i]) / total if mc_wins is not None else 0.0)
                for i, name in enumerate(data.teachers)}
    return check_routing_outcome(settings.routing, summary.wins, expected, uses_labels=False,
                                 use_mc=settings.use_mc, labels_given=0, comparison=None)


def cluster_details(data: TokenData, pool: TokenPool, number: int) -> dict:
    """What the conflicts list shows of a cluster beside its text: its kind, and per teacher
    its tags over the cluster's words (dropout off) and its confidences there."""
    cluster = pool.decoded.clusters[number]
    tags = {}
    for teacher, name in enumerate(data.teachers):
        spans = [span for owner, span in cluster.spans if owner == teacher]
        words = spans_to_tags(spans, cluster.end)[cluster.start:] if spans else (
            ["O"] * (cluster.end - cluster.start))
        tags[name] = words
    return {"scores": pool.result.confidences[number].tolist(), "kind": cluster.kind,
            "tags": tags,
            "mc": [float(f.mc_confidence[number]) for f in pool.features],
            "plain": [float(f.det_confidence[number]) for f in pool.features]}


def save_clusters(store: Store, key: str, data: TokenData, pool: TokenPool,
                  evaluation: TokenData | None) -> None:
    """One conflicts-list row per cluster: its marked sentence, margin, winner, the class its
    targets give it and (a pool with tags) its gold class."""
    classes = {name: i for i, name in enumerate(data.classes)}
    decided = target_tags(data, pool.result)
    rows = []
    for number, (cluster, text) in enumerate(zip(pool.decoded.clusters,
                                                 pool.decoded.text_of.tolist(), strict=True)):
        tags = decided[text][cluster.start:cluster.end]
        target = next((tag[2:] for tag in tags if tag != OUTSIDE_CLASS), OUTSIDE_CLASS)
        gold = None
        if data.gold is not None:
            spans = [s for s in entity_spans(data.gold[text], strict=False)
                     if s[0] < cluster.end and cluster.start < s[1]]
            gold = classes[spans[0][2]] if spans and spans[0][2] in classes else classes["O"]
        rows.append((number, float(pool.result.margin[number]), int(pool.result.routed[number]),
                     classes[target], gold, cluster_details(data, pool, number),
                     data.cluster_text(pool.decoded, number)))
    replace_instances(store.connection, key, rows)
