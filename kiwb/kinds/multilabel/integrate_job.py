"""`kiwb integrate` for multi-label teachers: integrate the pool per label and record it in the
shared store, with the (text, label) pairs whose owners disagree as the conflicts list."""

from __future__ import annotations

from kiwb.kinds.multilabel.stored_pool import (
    check_settings,
    integrate_label_pool,
    integration_key,
    label_data,
)
from kiwb.kinds.multilabel.summary import label_summary, save_conflicts
from kiwb.project.config import ProjectConfig
from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.workers.score_tasks import ScoreTask


def run_label_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                          tasks: list[ScoreTask]) -> IntegrationRecord:
    """Integrate a multi-label project's pool with `settings`; returns the integration as
    recorded. A labeled pool without an eval set is measured on its own labels."""
    check_settings(settings)  # a setting this kind cannot use: said before the scores are read
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    data = label_data(config, store, by_role["unlabeled"])
    pool = integrate_label_pool(settings, store, data)
    evaluation = label_data(config, store, by_role["eval"]) if by_role["eval"] else None
    if evaluation is None and data.gold is not None:
        evaluation = data
    summary = label_summary(data, pool, settings, evaluation)
    key = integration_key(data, settings, pool)
    store.record_integration(key, dataset="unlabeled", settings=settings.to_dict(),
                             summary=summary.to_dict())
    save_conflicts(store, key, data, pool)
    return IntegrationRecord.from_dict(store.integration(key))
