"""`kiwb train` for a multi-task project: one student with a slice of outputs per task, each
slice taught its task's targets as kiwb integrate kept them (read by the integration's key; or,
supervised, its gold labels), and the feature loss's targets (each teacher's pooled feature,
standardised per dimension over the pool)."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.core.choices import SUPERVISED
from kiwb.errors import KiwbError
from kiwb.kinds.multilabel.losses import prior_log_odds
from kiwb.kinds.multitask import KIND
from kiwb.kinds.multitask.data import gold_of
from kiwb.kinds.multitask.heads import output_name
from kiwb.kinds.multitask.integrate_job import (
    given_labels,
    stored_task_integration,
    task_references,
)
from kiwb.kinds.multitask.student import MISSING, MultiTaskStudent
from kiwb.kinds.multitask.teachers import union_heads
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.project.run_manifest import RunManifest
from kiwb.project.store import Store
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.teachers import teacher_content_hash
from kiwb.workers.training_data import TrainingData

# The feature loss's weight where kiwb.toml sets none, chosen on the dev splits of the Debian
# multi-task benchmark's two runs (BENCHMARKS.md, "Multi-task"): the mean of the tasks' dev
# figures was 62.0 / 64.1 / 64.8 at weights 0 / 0.5 / 2 on an H200 (pool 3,167) and 55.8 /
# 55.6 / 54.0 on the CPU (pool 1,200); 0.5 has the best average (59.9, against 58.9 and
# 59.4), and 2 lost a section class on the CPU run.
DEFAULT_FEATURE_WEIGHT = 0.5


def standardised(features: torch.Tensor) -> torch.Tensor:
    """Each dimension at mean 0 and standard deviation 1 over the pool (a constant one at 0)."""
    features = features.float()
    spread = features.std(0, unbiased=False)
    return (features - features.mean(0)) / torch.where(spread > 0, spread, torch.ones_like(spread))


def prepare_multitask(config: ProjectConfig, store: Store, request, tasks: list[ScoreTask]):
    """A multi-task run's TrainingData (see the module's docstring)."""
    settings = request.settings
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    teachers = [task.teacher for task in by_role["unlabeled"]]
    heads = union_heads(config, teachers)
    labels = [output_name(head.task, label) for head in heads for label in head.labels]
    pool_table = by_role["unlabeled"][0].table
    feature_weight = (config.training.feature_weight if config.training.feature_weight is not None
                      else DEFAULT_FEATURE_WEIGHT)
    targets = weights = label_ids = record = measured = given = None
    widths: tuple[int, ...] = ()
    if settings.method == SUPERVISED:
        label_ids = gold_of(heads, pool_table)
        missing = [head.task for head in heads if bool((label_ids[:, head.start] == MISSING).any())]
        if missing:
            raise KiwbError(f"{config.file}: the supervised run needs every task's gold labels in "
                            f"[data.unlabeled]; it has none for {', '.join(missing)} (a column "
                            "named as each task, or its [[tasks]] column)")
        feature_weight = 0.0
    else:  # every task's targets kiwb integrate kept, read by the integration's key
        record, stored, data, measured = stored_task_integration(config, store, settings, tasks)
        given = given_labels(data, settings, store)
        targets, weights = _in_head_order(stored, data, heads)
        if feature_weight > 0:
            count = len(pool_table.texts)
            features = [standardised(torch.from_numpy(data.features[t.name])) for t in teachers]
            widths = tuple(feature.shape[1] for feature in features)
            targets = torch.cat([targets, *features], dim=1)
            weights = torch.cat([weights, torch.ones(count, sum(widths))], dim=1)
    eval_table = by_role["eval"][0].table if by_role["eval"] else None
    eval_ids = eval_reference = None
    if eval_table is not None:
        eval_ids = gold_of(heads, eval_table)
        if record is not None and measured is not None:
            eval_reference = _references(data, task_references(measured, settings, data))
    multi = [head for head in heads if head.kind == "multi-label"]
    head_bias = None
    if multi:
        head_bias = torch.zeros(heads[-1].stop)
        taught = label_ids if targets is None else targets
        for head in multi:
            columns = slice(head.start, head.stop)
            head_bias[columns] = prior_log_odds(
                taught[:, columns], None if weights is None else weights[:, columns])
    manifest = RunManifest(
        kind=KIND.name,
        teachers=[{"name": t.name, "hash": teacher_content_hash(t, store),
                   "labels": list(t.labels),
                   "tasks": [[h.task, h.start, h.stop] for h in t.heads]} for t in teachers],
        labels=labels, method=settings.pinned(), student=config.training.student,
        data=pool_table.fingerprint,
        given_labels=texts_fingerprint([str(sorted((name, str(fingerprint)) for name, fingerprint
                                                   in given.items()))])
        if given is not None else None,
        eval_data=({"texts": eval_table.fingerprint,
                    "labels": texts_fingerprint([str(row) for row in eval_ids.tolist()])}
                   if eval_table is not None else None),
        training=config.training.manifest(),
        own={"tasks": [head.to_dict() for head in heads], "feature_weight": feature_weight,
             **({"integration": record.key} if record is not None else {})}).to_dict()
    coverage = torch.ones(len(teachers), len(labels), dtype=torch.bool)
    return TrainingData(
        labels, pool_table.texts, targets, weights, label_ids, coverage,
        eval_table.texts if eval_table is not None else None, eval_ids, None, manifest,
        eval_reference=eval_reference,
        student=MultiTaskStudent(heads, widths, feature_weight, head_bias))


def _in_head_order(stored: dict, data, heads) -> tuple[torch.Tensor, torch.Tensor]:
    """The stored targets and weights (every task's side by side, in the pool's task order)
    placed in the student's head slices."""
    columns, offset = {}, 0
    for name, part in data.parts.items():
        columns[name] = slice(offset, offset + len(part.labels))
        offset += len(part.labels)
    targets = torch.zeros(len(data.texts), heads[-1].stop)
    weights = torch.zeros(len(data.texts), heads[-1].stop)
    for head in heads:
        targets[:, head.start:head.stop] = stored["targets"][:, columns[head.task]]
        weights[:, head.start:head.stop] = stored["weights"][:, columns[head.task]]
    return targets, weights


def _references(data, references: dict[str, dict | None]) -> dict | None:
    """The run's untrained reference: the mean of the tasks' Ensembles, and each task's own,
    its Ensemble, which for a task one teacher answers is that teacher alone (the learning
    check holds each head to it)."""
    ensembles = {name: reference["ensemble"] for name, reference in references.items()
                 if reference is not None and reference["ensemble"] is not None}
    if not ensembles:
        return None
    tasks = {name: {"accuracy": ensemble,
                    "name": (f"the {name} teacher" if len(data.parts[name].teachers) == 1
                             else f"the {name} Ensemble")}
             for name, ensemble in ensembles.items()}
    return {"accuracy": float(np.mean(list(ensembles.values()))),
            "name": "the tasks' Ensembles", "tasks": tasks}
