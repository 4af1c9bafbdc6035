"""`kiwb integrate` for token teachers: integrate the pool and record it in the shared store,
with its conflict clusters as the conflicts list's instances."""

from __future__ import annotations

from kiwb.kinds.token.stored_pool import integrate_token_pool, integration_key, token_data
from kiwb.kinds.token.summary import save_clusters, token_summary
from kiwb.project.config import ProjectConfig
from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.workers.score_tasks import ScoreTask


def run_token_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                          tasks: list[ScoreTask]) -> IntegrationRecord:
    """Integrate a token project's pool with `settings`; returns the integration as recorded."""
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    data = token_data(config, store, by_role["unlabeled"])
    pool = integrate_token_pool(settings, store, data)
    evaluation = token_data(config, store, by_role["eval"]) if by_role["eval"] else None
    if evaluation is None and data.gold is not None:  # a tagged pool: measured on its own tags
        evaluation = data
    summary = token_summary(data, pool, settings, evaluation)
    key = integration_key(data, settings, pool)
    store.record_integration(key, dataset="unlabeled", settings=settings.to_dict(),
                             summary=summary.to_dict())
    save_clusters(store, key, data, pool, evaluation)
    return IntegrationRecord.from_dict(store.integration(key))
