"""The class funnel of a token integration: per entity type, where its entities are lost.

As for texts (kiwb.core.class_funnel), but a unit is a conflict cluster and a class an entity
type: how many clusters an owner of the type gives it, how many of those the routing sends to
such a teacher, how many clusters the targets give it; its share of the targets' entity mass
against its share of the owners' spans weighted by the routing; and on labeled texts, per gold
entity of the type, whether an owner's span, the routed teacher's span and the targets' spans
match it exactly.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from kiwb.core.class_priors import ownership
from kiwb.kinds.token.integration import cluster_features, decode_all, integrate_words
from kiwb.kinds.token.metrics import entity_spans
from kiwb.kinds.token.stored_pool import TokenData, TokenPool, cluster_scores, target_tags
from kiwb.project.records import ClassFunnel, IntegrationSettings, LabeledFunnel


def _cluster_types(cluster, teacher: int) -> set[str]:
    return {span.type for owner, span in cluster.spans if owner == teacher}


def token_funnel(data: TokenData, pool: TokenPool, settings: IntegrationSettings,
                 evaluation: TokenData | None) -> ClassFunnel:
    """Per entity type, the clusters and mass that carry it; with tagged texts (the eval set,
    or a tagged pool), the recall of each step."""
    types = data.types
    position = {t: i for i, t in enumerate(types)}
    says, routed_right, targeted = [0] * len(types), [0] * len(types), [0] * len(types)
    estimated = torch.zeros(len(types), dtype=torch.float64)
    scores = pool.result.confidences
    owned = (ownership(scores, pool.fitted.probabilistic, settings.tau) if len(scores)
             else torch.zeros(0, len(data.teachers)))
    decided = target_tags(data, pool.result)
    for number, (cluster, text) in enumerate(zip(pool.decoded.clusters,
                                                 pool.decoded.text_of.tolist(), strict=True)):
        for entity_type in {span.type for _, span in cluster.spans}:
            says[position[entity_type]] += 1
        for entity_type in _cluster_types(cluster, int(pool.result.routed[number])):
            routed_right[position[entity_type]] += 1
        for entity_type in {tag[2:] for tag in decided[text][cluster.start:cluster.end] if tag != "O"}:
            targeted[position[entity_type]] += 1
        for teacher in range(len(data.teachers)):
            for entity_type in _cluster_types(cluster, teacher):
                estimated[position[entity_type]] += float(owned[number, teacher])
    funnel = ClassFunnel(
        labels=list(types),
        owners={t: [n for n, tag_set in zip(data.teachers, data.tag_sets, strict=True)
                    if t in tag_set.types] for t in types},
        num_texts=len(pool.decoded.clusters), owner_says=says, routed_to_owner=routed_right,
        target_texts=targeted, target_share=_target_share(data, pool),
        estimated_share=(estimated / estimated.sum().clamp_min(1e-12)).tolist())
    if evaluation is None or evaluation.gold is None:
        return funnel
    where = "the unlabeled texts' own tags" if evaluation is data else "eval"
    return _with_recall(funnel, evaluation, pool, settings, where)


def _target_share(data: TokenData, pool: TokenPool) -> list[float]:
    """Each type's share of the targets' entity mass (B and I), words at their weights."""
    targets = pool.result.targets if pool.result.targets.dim() == 2 else pool.result.targets.mean(1)
    weighted = (pool.result.weights.unsqueeze(1) * targets).sum(0)  # (|Y|,)
    union = data.scores.union
    mass = torch.tensor([float(weighted[union.index(f"B-{t}")] + weighted[union.index(f"I-{t}")])
                         for t in data.types], dtype=torch.float64)
    return (mass / mass.sum().clamp_min(1e-12)).tolist()


def _with_recall(funnel: ClassFunnel, evaluation: TokenData, pool: TokenPool,
                 settings: IntegrationSettings, where: str) -> ClassFunnel:
    decoded = decode_all(evaluation.scores)
    features = cluster_features(evaluation.scores, decoded)
    chosen = cluster_scores(pool.fitted, features)
    routed = chosen.argmax(1) if len(chosen) else torch.zeros(0, dtype=torch.long)
    result = integrate_words(settings.method, evaluation.scores, decoded, chosen, tau=settings.tau,
                             reweight=settings.reweight, probabilistic=pool.fitted.probabilistic)
    decided = target_tags(evaluation, result)
    # Each text's teachers' spans, with the cluster they are in: (start, end, type) -> claims.
    claims: dict[int, dict[tuple, list[tuple[int, int]]]] = {}
    for number, (cluster, text) in enumerate(zip(decoded.clusters, decoded.text_of.tolist(),
                                                 strict=True)):
        for teacher, span in cluster.spans:
            key = (span.start, span.end, span.type)
            claims.setdefault(text, {}).setdefault(key, []).append((number, teacher))
    types = funnel.labels
    hits = {name: [0] * len(types) for name in ("gold", "owner", "routed", "target")}
    for text, tags in enumerate(evaluation.gold):
        target_spans = set(entity_spans(decided[text], strict=False))
        for start, end, entity_type in entity_spans(tags, strict=False):
            if entity_type not in types:
                continue
            index = types.index(entity_type)
            hits["gold"][index] += 1
            exact = claims.get(text, {}).get((start, end, entity_type), [])
            hits["owner"][index] += bool(exact)
            hits["routed"][index] += any(int(routed[number]) == teacher for number, teacher in exact)
            hits["target"][index] += (start, end, entity_type) in target_spans

    def recall(name: str) -> list[float | None]:
        return [None if gold == 0 else found / gold
                for found, gold in zip(hits[name], hits["gold"], strict=True)]

    labeled = LabeledFunnel(where=where, gold=hits["gold"], owner_recall=recall("owner"),
                            routed_recall=recall("routed"), target_recall=recall("target"))
    return replace(funnel, labeled=labeled)
