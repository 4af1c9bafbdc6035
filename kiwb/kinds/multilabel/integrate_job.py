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
    read_or_integrate,
    save_targets,
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
    return integrate_labels(config, store, settings, data, evaluation)


def integrate_labels(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                     data: LabelData, evaluation: LabelData | None) -> IntegrationRecord:
    """Integrate loaded label scores and record it, its targets kept beside the record."""
    pool = integrate_label_pool(settings, store, data)
    if evaluation is None and data.gold is not None:
        evaluation = data
    summary = label_summary(data, pool, settings, evaluation)
    key = integration_key(data, settings, pool.fingerprint)
    # the targets first: a record is only ever read with its targets beside it
    save_targets(config.root, key, {"targets": pool.result.targets,
                                    "weights": pool.result.weights})
    store.record_integration(key, dataset="unlabeled", settings=settings.to_dict(),
                             summary=summary.to_dict())
    save_conflicts(store, key, data, pool)
    return IntegrationRecord.from_dict(store.integration(key))


def stored_label_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                             data: LabelData, evaluation: LabelData | None,
                             given_labels: str | None):
    """The integration `kiwb integrate` recorded for these label scores, settings and given
    labels (`given_labels`: their fingerprint), with its (text, label) targets; made and
    recorded now where there is none (`evaluation`: the eval set's scores, where scored)."""
    found = store.integration(integration_key(data, settings, given_labels))
    candidates = [IntegrationRecord.from_dict(found)] if found is not None else []
    return read_or_integrate(config.root, candidates, len(data.texts),
                             lambda: integrate_labels(config, store, settings, data, evaluation))
