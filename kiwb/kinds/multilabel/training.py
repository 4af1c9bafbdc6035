"""`kiwb train` for multi-label teachers: targets and weights per (text, label) of the
integration kiwb integrate kept (read by its key), or, supervised, the pool's gold labels; the
eval set's gold labels, the manifest."""

from __future__ import annotations

from dataclasses import replace

import torch

from kiwb.core.choices import SUPERVISED
from kiwb.errors import KiwbError
from kiwb.kinds.multilabel import KIND
from kiwb.kinds.multilabel.check import OWNERS_MEAN
from kiwb.kinds.multilabel.data import check_known_labels
from kiwb.kinds.multilabel.integrate_job import stored_label_integration
from kiwb.kinds.multilabel.losses import prior_log_odds
from kiwb.kinds.multilabel.stored_pool import check_settings, label_data
from kiwb.kinds.multilabel.student import MultiLabelStudent, multi_hot
from kiwb.kinds.multilabel.summary import ENSEMBLE, eval_figures
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.project.run_manifest import RunManifest
from kiwb.project.store import Store
from kiwb.workers.integration_targets import given_labels_fingerprint, pinned_integration
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.teachers import pinned_teachers
from kiwb.workers.training_data import TrainingData


def _gold(table, union: list[str], config: ProjectConfig, role: str) -> torch.Tensor:
    spec = getattr(config.data, role)
    check_known_labels(table, union, spec.label_column)
    return multi_hot(table.label_sets, union)


def _label_fingerprint(table) -> dict:
    """The texts' and the gold label sets' fingerprints: either changing changes the run."""
    return {"texts": table.fingerprint,
            "labels": texts_fingerprint(["\x1f".join(labels) for labels in table.label_sets])}


def prepare_multilabel(config: ProjectConfig, store: Store, request, tasks: list[ScoreTask]):
    """A multi-label run's TrainingData: (n, L) targets and weights of the stored integration
    (or the pool's gold labels, supervised), the eval set's gold labels and the manifest. The
    eval figures are measured here, not read: they do not depend on the pool."""
    settings = request.settings
    if settings.method != SUPERVISED:
        check_settings(settings)
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    pool_table = by_role["unlabeled"][0].table
    union = list(dict.fromkeys(label for task in by_role["unlabeled"]
                               for label in task.teacher.classes))
    evaluation = (label_data(config, store, by_role["eval"]) if by_role["eval"] and all(
        len(store.done_shards(t.key)) == t.num_shards for t in by_role["eval"]) else None)
    targets = weights = label_ids = record = given_labels = None
    if settings.method == SUPERVISED:
        if pool_table.label_sets is None:
            raise KiwbError(f"{config.file}: the supervised run needs the pool's gold labels; set "
                            "label_column in [data.unlabeled]")
        label_ids = _gold(pool_table, union, config, "unlabeled")
    else:  # the targets kiwb integrate kept, read by the integration's key
        given_labels = given_labels_fingerprint(store, settings)
        record, stored = stored_label_integration(
            config, store, settings, label_data(config, store, by_role["unlabeled"]),
            evaluation, given_labels)
        targets, weights = stored["targets"], stored["weights"]
    eval_table = by_role["eval"][0].table if by_role["eval"] else None
    eval_ids = eval_routing = eval_reference = None
    if eval_table is not None:
        eval_ids = _gold(eval_table, union, config, "eval")
        if evaluation is not None:
            # a supervised run integrates nothing: its reference is still the teachers' union
            measured = settings if record is not None else replace(settings, method=ENSEMBLE)
            summary, _ = eval_figures(evaluation, measured)
            eval_reference = {"accuracy": summary.ensemble_accuracy, "name": OWNERS_MEAN}
            if record is not None and summary.routing_accuracy is not None:
                eval_routing = summary.routing_accuracy.to_dict()
    manifest = RunManifest(
        kind=KIND.name,
        teachers=pinned_teachers(by_role["unlabeled"], store),
        labels=union, method=settings.pinned(), student=config.training.student,
        data=pool_table.fingerprint, given_labels=given_labels,
        eval_data=_label_fingerprint(eval_table) if eval_table is not None else None,
        training=config.training.manifest(), own=pinned_integration(record)).to_dict()
    # Every student output is a label some teacher owns: nothing to mask as a softmax would.
    coverage = torch.ones(len(by_role["unlabeled"]), len(union), dtype=torch.bool)
    return TrainingData(
        union, pool_table.texts, targets, weights, label_ids, coverage,
        eval_table.texts if eval_table is not None else None, eval_ids, eval_routing, manifest,
        eval_reference=eval_reference,
        student=MultiLabelStudent(head_bias=prior_log_odds(label_ids) if targets is None
                                  else prior_log_odds(targets, weights)))
