"""`kiwb integrate` for a multi-task project: every task integrated by its own kind's pieces
(kiwb.kinds.multitask.stored_pool), recorded as one integration whose details hold each task's
record, with every task's conflicts in one list ("[task] text" rows)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
)
from kiwb.project.store import Store
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
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    data = task_data(config, store, by_role["unlabeled"], "unlabeled")
    evaluation = None
    if by_role["eval"] and all(len(store.done_shards(t.key)) == t.num_shards
                               for t in by_role["eval"]):
        evaluation = task_data(config, store, by_role["eval"], "eval")
    found = {name: integrate_task(part, settings, store,
                                  evaluation.parts[name] if evaluation is not None else None)
             for name, part in data.parts.items()}
    # its keys have held labels from the start; class_weighting is refused above: always off
    used = {"kind": "multi-task", "scores": data.score_keys, **settings.keyed(kept=("labels",)),
            "tasks": [[name, part.task.kind, part.labels] for name, part in data.parts.items()]}
    if settings.labels:
        used["given_labels"] = {name: result.fingerprint for name, result in found.items()}
    # the references are the eval set's; without one configured, a labeled pool's own
    measured = evaluation if evaluation is not None else None if by_role["eval"] else data
    references = {name: task_eval(measured.parts[name], settings) if measured is not None else
                  None for name in data.parts}
    return TaskIntegration(data, found, settings_key(used), references,
                           len(measured.texts) if measured is not None else 0)


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
            for teacher, count in result.summary["wins"].items():
                wins[teacher] += count
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
        num_texts=len(data.texts), teachers=teachers,
        score_keys=dict(zip(teachers, data.score_keys, strict=True)), labels=labels,
        overlapping_labels=[], wins=wins,
        margin_quantiles={str(q): float(np.quantile(shown, q)) for q in MARGIN_QUANTILES},
        margin_histogram=unit_histogram(margins),
        conflict_threshold=settings.conflict_threshold, conflicts=conflicts,
        eval=evaluation, teacher_labels=heads, teachers_kind="multi-task",
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
    integration = integrate_tasks(config, store, settings, tasks)
    summary = summary_of(integration, settings)
    store.record_integration(integration.key, dataset="unlabeled", settings=settings.to_dict(),
                             summary=summary.to_dict())
    save_task_conflicts(store, integration)
    return IntegrationRecord.from_dict(store.integration(integration.key))


