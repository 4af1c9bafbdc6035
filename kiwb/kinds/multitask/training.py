"""`kiwb train` for a multi-task project: one student with a slice of outputs per task, each
slice taught its task's integrated targets (or, supervised, its gold labels), and the feature
loss's targets (each teacher's pooled feature, standardised per dimension over the pool)."""

from __future__ import annotations

import torch

from kiwb.core.choices import SUPERVISED
from kiwb.errors import KiwbError
from kiwb.kinds.multilabel.losses import prior_log_odds
from kiwb.kinds.multitask import MULTI_TASK
from kiwb.kinds.multitask.data import gold_of
from kiwb.kinds.multitask.heads import output_name
from kiwb.kinds.multitask.integrate_job import integrate_tasks
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
    targets = weights = label_ids = integration = None
    widths: tuple[int, ...] = ()
    if settings.method == SUPERVISED:
        label_ids = gold_of(heads, pool_table)
        missing = [head.task for head in heads if bool((label_ids[:, head.start] == MISSING).any())]
        if missing:
            raise KiwbError(f"{config.file}: the supervised run needs every task's gold labels in "
                            f"[data.unlabeled]; it has none for {', '.join(missing)} (a column "
                            "named as each task, or its [[tasks]] column)")
        feature_weight = 0.0
    else:
        integration = integrate_tasks(config, store, settings, tasks)
        count = len(pool_table.texts)
        targets = torch.zeros(count, heads[-1].stop)
        weights = torch.zeros(count, heads[-1].stop)
        for head in heads:
            found = integration.tasks[head.task]
            targets[:, head.start:head.stop] = found.targets
            weights[:, head.start:head.stop] = (found.weights[:, None] if found.weights.dim() == 1
                                                else found.weights)
        if feature_weight > 0:
            features = [standardised(torch.from_numpy(integration.data.features[t.name]))
                        for t in teachers]
            widths = tuple(feature.shape[1] for feature in features)
            targets = torch.cat([targets, *features], dim=1)
            weights = torch.cat([weights, torch.ones(count, sum(widths))], dim=1)
    eval_table = by_role["eval"][0].table if by_role["eval"] else None
    eval_ids = eval_reference = None
    if eval_table is not None:
        eval_ids = gold_of(heads, eval_table)
        if integration is not None:
            from kiwb.kinds.multitask.integrate_job import summary_of

            summary = summary_of(integration, settings)
            if summary.eval is not None:
                # each task's own reference too: its Ensemble, which for a task one teacher
                # answers is that teacher alone (the learning check holds each head to it)
                parts = integration.data.parts
                tasks = {name: {"accuracy": reference["ensemble"],
                                "name": (f"the {name} teacher" if len(parts[name].teachers) == 1
                                         else f"the {name} Ensemble")}
                         for name, reference in integration.evaluation.items()
                         if reference is not None and reference["ensemble"] is not None}
                eval_reference = {"accuracy": summary.eval.ensemble_accuracy,
                                  "name": "the tasks' Ensembles", "tasks": tasks}
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
        kind=MULTI_TASK.name,
        teachers=[{"name": t.name, "hash": teacher_content_hash(t, store),
                   "labels": list(t.labels),
                   "tasks": [[h.task, h.start, h.stop] for h in t.heads]} for t in teachers],
        labels=labels, method=settings.pinned(), student=config.training.student,
        data=pool_table.fingerprint,
        given_labels=texts_fingerprint([str(sorted((name, str(r.fingerprint)) for name, r in
                                                   integration.tasks.items()))])
        if integration is not None and settings.labels else None,
        eval_data=({"texts": eval_table.fingerprint,
                    "labels": texts_fingerprint([str(row) for row in eval_ids.tolist()])}
                   if eval_table is not None else None),
        training=config.training.manifest(),
        own={"tasks": [head.to_dict() for head in heads],
             "feature_weight": feature_weight}).to_dict()
    coverage = torch.ones(len(teachers), len(labels), dtype=torch.bool)
    return TrainingData(
        labels, pool_table.texts, targets, weights, label_ids, coverage,
        eval_table.texts if eval_table is not None else None, eval_ids, None, manifest,
        eval_reference=eval_reference,
        student=MultiTaskStudent(heads, widths, feature_weight, head_bias))
