"""`kiwb integrate` for token teachers: integrate the pool and record it in the shared store,
with its conflict clusters as the conflicts list's instances and its word targets beside it
(a training run reads them back by the key)."""

from __future__ import annotations

from kiwb.kinds.token.stored_pool import (
    TokenData,
    integrate_token_pool,
    integration_key,
    token_data,
)
from kiwb.kinds.token.summary import eval_inputs, save_clusters, token_summary
from kiwb.project.config import ProjectConfig
from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.workers.integration_targets import (
    MadeIntegration,
    made,
    measured_alike,
    read_or_integrate,
    record_made,
    recorded,
)
from kiwb.workers.score_tasks import ScoreTask


def run_token_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                          tasks: list[ScoreTask]) -> IntegrationRecord:
    """Integrate a token project's pool with `settings`; returns the integration as recorded."""
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    data = token_data(config, store, by_role["unlabeled"])
    evaluation = token_data(config, store, by_role["eval"]) if by_role["eval"] else None
    return record_made(config.root, store, token_made(store, settings, data, evaluation))


def token_made(store: Store, settings: IntegrationSettings, data: TokenData,
               evaluation: TokenData | None) -> MadeIntegration:
    """Integrate loaded word scores (a tagged pool without an eval set is measured on its own
    tags): the record, the word targets and the conflict clusters to list."""
    pool = integrate_token_pool(settings, store, data)
    if evaluation is None and data.gold is not None:  # a tagged pool: measured on its own tags
        evaluation = data
    key = integration_key(data, settings, pool.fingerprint)
    return made(key, settings, token_summary(data, pool, settings, evaluation),
                {"targets": pool.result.targets, "weights": pool.result.weights},
                lambda store: save_clusters(store, key, data, pool, evaluation))


def stored_token_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                             data: TokenData, evaluation: TokenData | None,
                             eval_unfinished: bool, given_labels: str | None):
    """The integration `kiwb integrate` recorded for these word scores, settings and given
    labels (`given_labels`: kiwb.workers.integration_targets.given_labels_fingerprint), with its
    word targets (worked out the same way where there is none). `evaluation`: the eval set's
    scores, None without one or while it is not scored (`eval_unfinished`)."""
    key = integration_key(data, settings, given_labels)
    measured = evaluation if evaluation is not None else data if data.gold is not None else None
    candidates = [record for record in recorded(store, key) if measured_alike(
        record, eval_inputs(measured) if measured is not None else None, eval_unfinished)]
    return read_or_integrate(config.root, candidates, int(data.scores.offsets[-1]),
                             lambda: token_made(store, settings, data, evaluation))
