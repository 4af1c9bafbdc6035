"""`kiwb integrate` for multi-label teachers: integrate the pool per label and record it in the
shared store, with the (text, label) pairs whose owners disagree as the conflicts list and its
targets beside it (a training run reads them back by the key)."""

from __future__ import annotations

from kiwb.kinds.multilabel.stored_pool import (
    LabelData,
    check_settings,
    integrate_label_pool,
    integration_key,
    label_data,
)
from kiwb.kinds.multilabel.summary import label_summary, save_conflicts
from kiwb.project.config import ProjectConfig
from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.workers.integration_targets import (
    MadeIntegration,
    made,
    read_or_integrate,
    record_made,
    recorded,
)
from kiwb.workers.score_tasks import ScoreTask


def run_label_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                          tasks: list[ScoreTask]) -> IntegrationRecord:
    """Integrate a multi-label project's pool with `settings`; returns the integration as
    recorded. A labeled pool without an eval set is measured on its own labels."""
    check_settings(settings)  # a setting this kind cannot use: said before the scores are read
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    data = label_data(config, store, by_role["unlabeled"])
    evaluation = label_data(config, store, by_role["eval"]) if by_role["eval"] else None
    return record_made(config.root, store, labels_made(store, settings, data, evaluation))


def labels_made(store: Store, settings: IntegrationSettings, data: LabelData,
                evaluation: LabelData | None) -> MadeIntegration:
    """Integrate loaded label scores: the record, the (text, label) targets and the
    conflicting pairs to list."""
    pool = integrate_label_pool(settings, store, data)
    if evaluation is None and data.gold is not None:
        evaluation = data
    key = integration_key(data, settings, pool.fingerprint)
    return made(key, settings, label_summary(data, pool, settings, evaluation),
                {"targets": pool.result.targets, "weights": pool.result.weights},
                lambda store: save_conflicts(store, key, data, pool))


def stored_label_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                             data: LabelData, evaluation: LabelData | None,
                             given_labels: str | None):
    """The integration `kiwb integrate` recorded for these label scores, settings and given
    labels (`given_labels`: their fingerprint), with its (text, label) targets; worked out the
    same way where there is none (`evaluation`: the eval set's scores, where scored)."""
    return read_or_integrate(config.root,
                             recorded(store, integration_key(data, settings, given_labels)),
                             len(data.texts),
                             lambda: labels_made(store, settings, data, evaluation))
