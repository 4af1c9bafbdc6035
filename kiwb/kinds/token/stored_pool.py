"""The token kind's integration, worker side: stored word scores to clusters, routing, targets.

It reads the score sets the shared scoring job wrote (one row per word, `num_words` per text),
decodes each teacher's spans, fits the routing on the pool's conflict clusters and builds the
word targets (kiwb.kinds.token.integrate_job records them; kiwb.kinds.token.training trains on
them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from kiwb.core import routing as routes
from kiwb.core.choices import FEW_LABEL_ROUTINGS, OWN_SCORE_ROUTINGS
from kiwb.errors import ConfigError
from kiwb.kinds.token.integration import (
    TextClusters,
    WordIntegration,
    WordScores,
    cluster_features,
    cluster_words,
    decode_all,
    integrate_words,
)
from kiwb.kinds.token.tags import TagSet, read_tag_set, spans_to_tags, union_tags
from kiwb.kinds.token.targets import repair_bio
from kiwb.kinds.token.units import marked_text
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import settings_key
from kiwb.project.labels import labels_by_hash, labels_fingerprint, text_hash
from kiwb.project.records import IntegrationSettings
from kiwb.project.store import Store
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.stored_scores import load_scores

OUTSIDE_CLASS = "O"  # a cluster decided as no entity, in the conflicts list's class column


@dataclass(frozen=True)
class TokenData:
    """One data set's word scores by every teacher, with its words and gold tags."""

    teachers: list[str]
    tag_sets: list[TagSet]
    types: list[str]            # the union's entity types, teacher then type order
    scores: WordScores
    words: list[list[str]]
    gold: list[list[str]] | None  # BIO2 per word, where the data set has tags
    score_keys: list[str]
    windowed_texts: dict[str, int] | None = None  # per teacher: texts read in windows

    @property
    def classes(self) -> list[str]:
        """What a cluster is decided as: an entity type, or O (no entity)."""
        return [*self.types, OUTSIDE_CLASS]

    def cluster_text(self, decoded: TextClusters, number: int) -> str:
        cluster, text = decoded.clusters[number], int(decoded.text_of[number])
        return marked_text(self.words[text], cluster.start, cluster.end)


def token_data(config: ProjectConfig, store: Store, tasks: list[ScoreTask]) -> TokenData:
    """The word scores of one data set's tasks (one per teacher), stacked for integration."""
    arrays = [load_scores(config, store, task) for task in tasks]
    tag_sets = [read_tag_set(task.teacher.labels, scheme=task.teacher.scheme,
                             types=task.teacher.classes) for task in tasks]
    types = list(dict.fromkeys(t for tag_set in tag_sets for t in tag_set.types))
    counts = torch.from_numpy(arrays[0]["num_words"])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])

    def stack(name: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([a[name] for a in arrays], axis=1))  # (W, N)

    scores = WordScores(
        tag_sets=tag_sets, union=union_tags(types), offsets=offsets,
        det_probs=[torch.from_numpy(a["det_probs"]) for a in arrays],
        det_logits=[torch.from_numpy(a["det_logits"]) for a in arrays],
        mc_probs=[torch.from_numpy(a["mc_probs"]) for a in arrays],
        mc_confidence=stack("mc_confidence"), det_confidence=stack("det_confidence"),
        mutual_information=stack("mutual_information"))
    table = tasks[0].table
    windowed = {task.teacher.name: int(a["windowed_texts"].sum()) if "windowed_texts" in a else 0
                for task, a in zip(tasks, arrays, strict=True)}
    return TokenData([task.teacher.name for task in tasks], tag_sets, types, scores,
                     table.words, table.tags, [task.key for task in tasks], windowed)


def fit_cluster_routing(settings: IntegrationSettings, data: TokenData,
                        features: list[routes.TeacherFeatures]) -> routes.FittedRouting:
    """The settings' routing fitted on the pool's clusters (label-free routings only)."""
    if settings.routing in FEW_LABEL_ROUTINGS:
        label_free = ", ".join(name for name in routes.ROUTINGS
                               if name not in (*FEW_LABEL_ROUTINGS, *OWN_SCORE_ROUTINGS))
        raise ConfigError(f"routing {settings.routing!r} is fitted on labeled texts of a "
                          f"sequence project; token teachers route by a label-free routing "
                          f"({label_free}), and spans labeled in the Conflicts pane become "
                          "targets with --given-labels")
    if len(features[0].mc_confidence) < 4 and settings.routing not in ("confidence", "rank"):
        raise ConfigError(f"routing {settings.routing!r} needs 4 or more conflict clusters in "
                          f"the pool, and the teachers found "
                          f"{len(features[0].mc_confidence)}: use rank or confidence")
    return routes.fit_routing(settings.routing, features, use_mc=settings.use_mc,
                              teacher_names=data.teachers)


@dataclass
class TokenPool:
    """The pool's integration: its clusters, the routing fitted on them, the word targets."""

    decoded: TextClusters
    features: list[routes.TeacherFeatures]
    fitted: routes.FittedRouting
    result: WordIntegration
    given: dict[int, str | None]  # cluster number -> its given label (None: no entity)
    fingerprint: str | None = None


def cluster_scores(fitted: routes.FittedRouting, features) -> torch.Tensor:
    """(k, N) routing scores of k clusters (none: an empty (0, N))."""
    if len(features[0].mc_confidence) == 0:
        return torch.zeros(0, len(features))
    return fitted.scores(features).float()


def integrate_token_pool(settings: IntegrationSettings, store: Store,
                         data: TokenData) -> TokenPool:
    """Clusters, routing and word targets of the pool; with `settings.labels`, the labels
    given to clusters (a type, or none: no entity) replace their words' targets at weight 1."""
    decoded = decode_all(data.scores)
    features = cluster_features(data.scores, decoded)
    fitted = fit_cluster_routing(settings, data, features)
    result = integrate_words(settings.method, data.scores, decoded, cluster_scores(fitted, features),
                             tau=settings.tau, reweight=settings.reweight,
                             probabilistic=fitted.probabilistic)
    pool = TokenPool(decoded, features, fitted, result, {})
    if settings.labels:
        pool = apply_given_labels(store, data, pool)
    return pool


def apply_given_labels(store: Store, data: TokenData, pool: TokenPool) -> TokenPool:
    """The pool with every labeled cluster's words taught its given type (or O) at weight 1."""
    by_hash = labels_by_hash(store.connection)
    known = set(data.types)
    given = {}
    for number in range(len(pool.decoded.clusters)):
        key = text_hash(data.cluster_text(pool.decoded, number))
        label = by_hash.get(key, "absent")
        if label == OUTSIDE_CLASS:  # the class column's O: no entity, as none says
            label = None
        if label is None or label in known:
            given[number] = label
    if not given:
        return replace(pool, fingerprint=labels_fingerprint(by_hash))
    targets, weights = pool.result.targets.clone(), pool.result.weights.clone()
    spans = cluster_words(data.scores, pool.decoded)
    index = {tag: i for i, tag in enumerate(data.scores.union)}
    for number, label in given.items():
        words = spans[number]
        tags = ([OUTSIDE_CLASS] * len(words) if label is None
                else [f"B-{label}"] + [f"I-{label}"] * (len(words) - 1))
        one_hot = torch.nn.functional.one_hot(torch.tensor([index[t] for t in tags]),
                                              len(data.scores.union)).float()
        if targets.dim() == 3:  # UHC: every teacher that knows the type is told it
            targets[words] = one_hot.unsqueeze(1).expand(-1, targets.shape[1], -1)
        else:
            targets[words] = one_hot
        weights[words] = 1.0
    result = replace(pool.result, targets=targets, weights=weights)
    return replace(pool, result=result, given=given, fingerprint=labels_fingerprint(by_hash))


def target_tags(data: TokenData, result: WordIntegration) -> list[list[str]]:
    """The word targets' top tags per text (UHC: the teachers' mean, repaired)."""
    targets = result.targets if result.targets.dim() == 2 else result.targets.mean(1)
    union = data.scores.union
    found = []
    for text in range(data.scores.num_texts):
        words = targets[data.scores.words_of(text)]
        found.append([union[i] for i in repair_bio(words, union).argmax(1).tolist()])
    return found


def teacher_tags(data: TokenData, decoded: TextClusters, teacher: int) -> list[list[str]]:
    """One teacher's decoded spans as BIO2 tags, text by text (what it says alone)."""
    return [spans_to_tags(decoded.spans[text][teacher], len(data.words[text]))
            for text in range(data.scores.num_texts)]


def integration_key(data: TokenData, settings: IntegrationSettings,
                    given_labels: str | None) -> str:
    """The integration's key: the score sets, the settings that change the targets and the
    labels given (`given_labels`: their fingerprint, where the settings read them)."""
    used = {"kind": "token", "scores": data.score_keys, **settings.keyed()}
    if given_labels is not None:
        used["gold_labels"] = given_labels
    return settings_key(used)
