"""The multi-label kind's integration, worker side: stored per-label scores to targets per
(text, label), with the labels given to conflicts in the workbench.

It reads the score sets the shared scoring job wrote ((n, C_t) arrays per teacher), lays them
on the union of labels (kiwb.kinds.multilabel.pool) and integrates them per label
(kiwb.kinds.multilabel.integration); integrate_job records the result and training.py trains
on it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from kiwb.errors import ConfigError, KiwbError
from kiwb.kinds.multilabel.data import check_known_labels
from kiwb.kinds.multilabel.integration import LabelIntegration
from kiwb.kinds.multilabel.pool import (
    LabelConflict,
    LabelScores,
    integrate_label_scores,
    label_conflicts,
    stack_label_scores,
)
from kiwb.kinds.multilabel.student import multi_hot
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import settings_key
from kiwb.project.labels import labels_by_hash, labels_fingerprint, text_hash
from kiwb.project.records import IntegrationSettings
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.stored_scores import load_scores

# Owners are compared per (text, label) by their per-label confidence; the calibrated routings
# estimate which teacher's label set holds a text's one class, which a multi-label text lacks.
ROUTING = "confidence"


@dataclass(frozen=True)
class LabelData:
    """One data set's per-label scores by every teacher, its texts and its gold labels."""

    scores: LabelScores
    texts: list[str]
    gold: torch.Tensor | None  # (n, L) 0/1 where the data set has labels
    score_keys: list[str]

    @property
    def teachers(self) -> list[str]:
        return self.scores.teachers

    @property
    def union(self) -> list[str]:
        return self.scores.union

    @property
    def label_sets(self) -> list[list[str]]:
        """Each teacher's own labels, in its order."""
        return [[label for label, owned in zip(self.union, row.tolist(), strict=True) if owned]
                for row in self.scores.owners]


def pair_text(label: str, text: str) -> str:
    """How a (text, label) conflict reads in the conflicts list and the labels store: the
    label in brackets, then the text (a label given to it says yes, none says no)."""
    return f"[{label}] {text}"


def label_data(config: ProjectConfig, store: Store, tasks: list[ScoreTask]) -> LabelData:
    """The per-label scores of one data set's tasks (one per teacher), on the union labels."""
    if any(len(store.done_shards(task.key)) < task.num_shards for task in tasks):
        raise KiwbError(f"no complete teacher scores for the {tasks[0].dataset} data yet; run: "
                        + command("score", config.root))
    arrays = [load_scores(config, store, task) for task in tasks]
    scores = stack_label_scores([task.teacher.name for task in tasks],
                                [list(task.teacher.classes) for task in tasks], arrays)
    table = tasks[0].table
    gold = None
    if table.label_sets is not None:
        spec = getattr(config.data, tasks[0].dataset)
        check_known_labels(table, scores.union, spec.label_column)
        gold = multi_hot(table.label_sets, scores.union)
    return LabelData(scores, table.texts, gold, [task.key for task in tasks])


@dataclass(frozen=True)
class LabelPool:
    """The pool's integration: targets and weights per (text, label), the conflicts, and the
    labels given to conflicts ((text, label) -> yes or no)."""

    result: LabelIntegration
    conflicts: list[LabelConflict]
    given: dict[tuple[int, str], bool]
    fingerprint: str | None = None


def check_settings(settings: IntegrationSettings) -> None:
    """Refuse, in one line, a routing that only means something for one label per text (the
    settings this kind never applies are refused by its description: unused_settings)."""
    if settings.routing != ROUTING:
        raise ConfigError(f"routing {settings.routing!r} compares teachers over one class per "
                          "text; multi-label teachers are compared per label by their confidence "
                          f'(MC dropout, or plain with --no-mc): set routing = "{ROUTING}" or "auto"')


def integrate_label_pool(settings: IntegrationSettings, store: Store, data: LabelData,
                         balance_sides: bool = True) -> LabelPool:
    """Targets per (text, label) under the settings' method; with `settings.labels`, the yes or
    no given to a conflict replaces its target at weight 1. `balance_sides`: MUKI's margins
    rescaled per label and side (kiwb.kinds.multilabel.integration.side_balanced), or raw."""
    check_settings(settings)
    result = integrate_label_scores(data.scores, settings.method, use_mc=settings.use_mc,
                                    with_transfer=bool(settings.transfer), tau=settings.tau,
                                    reweight=settings.reweight, balance_sides=balance_sides)
    pool = LabelPool(result, label_conflicts(data.scores, result), {})
    if settings.labels:
        pool = apply_given_labels(store, data, pool)
    return pool


def apply_given_labels(store: Store, data: LabelData, pool: LabelPool) -> LabelPool:
    """The pool with every labeled conflict's target set to its yes (1) or no (0), weight 1. A
    conflict labeled with another label than its own is no answer and is left as it was."""
    by_hash = labels_by_hash(store.connection)
    given = {}
    for conflict in pool.conflicts:
        answer = by_hash.get(text_hash(pair_text(conflict.label, data.texts[conflict.text])),
                             "absent")
        if answer is None or answer == conflict.label:
            given[(conflict.text, conflict.label)] = answer is not None
    fingerprint = labels_fingerprint(by_hash)
    if not given:
        return replace(pool, fingerprint=fingerprint)
    targets, weights = pool.result.targets.clone(), pool.result.weights.clone()
    column = {label: i for i, label in enumerate(data.union)}
    for (text, label), yes in given.items():
        targets[text, column[label]] = 1.0 if yes else 0.0
        weights[text, column[label]] = 1.0
    result = replace(pool.result, targets=targets, weights=weights)
    return replace(pool, result=result, given=given, fingerprint=fingerprint)


def integration_key(data: LabelData, settings: IntegrationSettings,
                    given_labels: str | None) -> str:
    """The integration's key: the score sets, the settings that change the targets and the
    labels given (`given_labels`: their fingerprint, where the settings read them)."""
    # the given labels by their fingerprint; the single-label settings are refused, so off
    used = {"kind": "multi-label", "scores": data.score_keys,
            **settings.keyed(left_out=("labels",))}
    if settings.labels:
        used["given_labels"] = given_labels
    return settings_key(used)
