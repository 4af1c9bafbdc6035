"""`kiwb integrate` for a multi-task project: every task integrated by its own kind's pieces
(kiwb.kinds.multitask.stored_pool), recorded as one integration whose details hold each task's
record, with every task's conflicts in one list ("[task] text" rows)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kiwb.core.histograms import unit_histogram
from kiwb.kinds.multitask.stored_pool import (
    MEAN,
    TaskData,
    TaskTargets,
    integrate_task,
    task_data,
    task_eval,
)
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import settings_key
from kiwb.project.instances import replace_instances
from kiwb.project.records import (
    EvalSummary,
    IntegrationRecord,
    IntegrationSettings,
    IntegrationSummary,
    teacher_facts,
)
from kiwb.project.store import Store
from kiwb.workers.integration_targets import (
    MadeIntegration,
    given_labels_fingerprint,
    made,
    read_or_integrate,
    record_made,
    recorded,
)
from kiwb.workers.score_tasks import ScoreTask

MARGIN_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclass
class TaskIntegration:
    """A multi-task pool's integration: each task's targets, in kiwb.toml's task order."""

    data: TaskData
    tasks: dict[str, TaskTargets]
    key: str
    evaluation: dict[str, dict | None]  # per task, its untrained references on the eval set
    eval_texts: int = 0


def integrate_tasks(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                    tasks: list[ScoreTask]) -> TaskIntegration:
    """Integrate every task of the pool (the eval set, when scored, gives each its figures)."""
    return integrate_loaded(store, settings, *task_inputs(config, store, tasks))


def integrate_loaded(store: Store, settings: IntegrationSettings, data: TaskData,
                     evaluation: TaskData | None, measured: TaskData | None) -> TaskIntegration:
    """Integrate every task of loaded scores (task_inputs' three)."""
    found = {name: integrate_task(part, settings, store,
                                  evaluation.parts[name] if evaluation is not None else None)
             for name, part in data.parts.items()}
    return TaskIntegration(data, found, integration_key(data, settings, store),
                           task_references(measured, settings, data),
                           len(measured.texts) if measured is not None else 0)


def task_inputs(config: ProjectConfig, store: Store, tasks: list[ScoreTask]
                ) -> tuple[TaskData, TaskData | None, TaskData | None]:
    """The pool's scores per task, the eval set's (where scored) and what the untrained
    references are measured on: the eval set; without one configured, a labeled pool's own."""
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    data = task_data(config, store, by_role["unlabeled"], "unlabeled")
    evaluation = None
    if by_role["eval"] and all(len(store.done_shards(t.key)) == t.num_shards
                               for t in by_role["eval"]):
        evaluation = task_data(config, store, by_role["eval"], "eval")
    return data, evaluation, evaluation if evaluation is not None else None if by_role["eval"] else data


def task_references(measured: TaskData | None, settings: IntegrationSettings,
                    data: TaskData) -> dict[str, dict | None]:
    """Per task, its untrained references on `measured` (None where nothing is measured)."""
    return {name: task_eval(measured.parts[name], settings) if measured is not None else None
            for name in data.parts}


def given_labels(data: TaskData, settings: IntegrationSettings, store: Store) -> dict | None:
    """Per task, the fingerprint of the labels given that its targets read (None for a
    single-label task one teacher answers: its answers are its targets), where the settings
    read labels at all."""
    if not settings.labels:
        return None
    given = given_labels_fingerprint(store, settings)
    return {name: None if len(part.teachers) == 1 and not part.multi else given
            for name, part in data.parts.items()}


def integration_key(data: TaskData, settings: IntegrationSettings, store: Store) -> str:
    """The integration's key: the score sets, the settings, the tasks and the labels given."""
    # its keys have held labels from the start; class_weighting is refused above: always off
    used = {"kind": "multi-task", "scores": data.score_keys, **settings.keyed(kept=("labels",)),
            "tasks": [[name, part.task.kind, part.labels] for name, part in data.parts.items()]}
    if settings.labels:
        used["given_labels"] = given_labels(data, settings, store)
    return settings_key(used)


def task_targets(integration: TaskIntegration) -> dict[str, torch.Tensor]:
    """Every task's targets and weights side by side, in kiwb.toml's task order (the student's
    outputs; a single-label task's weight repeated over its labels)."""
    found = integration.tasks
    targets = torch.cat([found[name].targets for name in integration.data.parts], dim=1)
    weights = torch.cat([found[name].weights[:, None].expand_as(found[name].targets)
                         if found[name].weights.dim() == 1 else found[name].weights
                         for name in integration.data.parts], dim=1)
    return {"targets": targets, "weights": weights}


def task_figures(integration: TaskIntegration) -> dict:
    """Per task: its kind, teachers, labels, its own kind's record where several teachers
    answer it (margins, wins, routing, conflicts) and its untrained references on eval."""
    return {name: {"kind": part.task.kind, "teachers": part.teachers, "labels": part.labels,
                   "summary": integration.tasks[name].summary,
                   "conflicts": len(integration.tasks[name].conflicts),
                   "eval": integration.evaluation[name]}
            for name, part in integration.data.parts.items()}


def summary_of(integration: TaskIntegration, settings: IntegrationSettings) -> IntegrationSummary:
    """One summary for the shared panes: margins, wins and conflicts over every task several
    teachers answer; each task's own record in details["tasks"]."""
    data, found = integration.data, integration.tasks
    teachers = list(data.features)
    margins = np.concatenate([result.margin.flatten().numpy() for result in found.values()
                              if result.margin is not None and result.summary is not None]
                             or [np.zeros(0)])
    shown = margins if len(margins) else np.zeros(1)
    wins = dict.fromkeys(teachers, 0)
    for result in found.values():
        if result.summary is not None:
            for facts in result.summary["per_teacher"]:
                wins[facts["name"]] += facts["wins"]
    labels = [label for part in data.parts.values() for label in part.labels]  # "task/label"
    ensembles = [reference["ensemble"] for reference in integration.evaluation.values()
                 if reference is not None and reference["ensemble"] is not None]
    evaluation = None
    if ensembles:
        evaluation = EvalSummary(num_texts=integration.eval_texts, routing_accuracy=None,
                                 ensemble_accuracy=float(np.mean(ensembles)), teacher_accuracy=None)
    conflicts = sum(1 for result in found.values() for row in result.conflicts
                    if row[0] < settings.conflict_threshold)
    heads = {teacher: [] for teacher in teachers}
    for part in data.parts.values():
        for teacher, head in zip(part.teachers, part.heads, strict=True):
            heads[teacher] += list(head.labels)
    return IntegrationSummary(
        num_texts=len(data.texts),
        per_teacher=teacher_facts(teachers, data.score_keys, list(wins.values()),
                                  labels=list(heads.values())),
        labels=labels, overlapping_labels=[],
        margin_quantiles={str(q): float(np.quantile(shown, q)) for q in MARGIN_QUANTILES},
        margin_histogram=unit_histogram(margins),
        conflict_threshold=settings.conflict_threshold, conflicts=conflicts,
        eval=evaluation, teachers_kind="multi-task",
        details={"tasks": task_figures(integration),
                 "consensus": "mean of logits" if settings.method == MEAN else "MC uncertainty",
                 "texts": len(data.texts)})


def save_task_conflicts(store: Store, integration: TaskIntegration) -> None:
    """One conflicts-list row per (text, task) several teachers answer (per (text, label) pair
    whose owners disagree, for a multi-label task): class ids index the student's outputs."""
    rows, offset, number = [], 0, 0
    teachers = list(integration.data.features)
    for name, part in integration.data.parts.items():
        for margin, routed, column, gold, details, text in integration.tasks[name].conflicts:
            # `routed` counts the task's teachers; the list counts the project's
            owner = teachers.index(part.teachers[routed])
            scores = [0.0] * len(teachers)
            for teacher, value in zip(details["teachers"], details["confidence"], strict=True):
                scores[teachers.index(teacher)] = value
            rows.append((number, float(margin), owner, offset + column,
                         offset + gold if gold is not None else None,
                         {**details, "scores": scores}, text))
            number += 1
        offset += len(part.labels)
    replace_instances(store.connection, integration.key, rows)


def run_task_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                         tasks: list[ScoreTask]) -> IntegrationRecord:
    """The multi-task kind's integrate: integrate, record, list the conflicts."""
    return record_tasks(config, store, settings, integrate_tasks(config, store, settings, tasks))


def tasks_made(settings: IntegrationSettings, integration: TaskIntegration) -> MadeIntegration:
    """An integration of every task: its record, every task's targets side by side (a
    training run reads them back by the key) and the conflicts to list."""
    return made(integration.key, settings, summary_of(integration, settings),
                task_targets(integration), lambda store: save_task_conflicts(store, integration))


def record_tasks(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                 integration: TaskIntegration) -> IntegrationRecord:
    """Record an integration, its targets kept beside it and its conflicts listed."""
    return record_made(config.root, store, tasks_made(settings, integration))


def stored_task_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                            tasks: list[ScoreTask]):
    """The integration `kiwb integrate` recorded for these scores, settings, tasks and given
    labels, with every task's targets side by side (worked out the same way where there is
    none); and the loaded inputs: the pool, the eval set and what references measure."""
    data, evaluation, measured = task_inputs(config, store, tasks)
    record, targets = read_or_integrate(
        config.root, recorded(store, integration_key(data, settings, store)), len(data.texts),
        lambda: tasks_made(settings, integrate_loaded(store, settings, data, evaluation, measured)))
    return record, targets, data, measured
