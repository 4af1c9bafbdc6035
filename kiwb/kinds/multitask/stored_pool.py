"""The multi-task kind's integration, worker side: each task of a data set integrated by its
own kind's pieces, from the heads' stored arrays.

A single-label task answered by several teachers is routed as a single-label project is (MUKI
routing, kiwb.kinds.sequence.integration: the routing fitted on the pool, margins, given
labels); a multi-label task is integrated per label (kiwb.kinds.multilabel). A task with one
teacher takes that teacher's answers at weight 1. [integration] method "mean" is VENUS'
consensus instead: the mean of the teachers' logits (multi-label: of the owners'
probabilities), weight 1.

A task's texts are "[task] text" wherever the labels store is read, so a label given to a
conflict of one task answers that task only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from kiwb.errors import KiwbError
from kiwb.kinds.multilabel.pool import label_conflicts, stack_label_scores
from kiwb.kinds.multilabel.stored_pool import LabelData, integrate_label_pool, pair_text
from kiwb.kinds.multilabel.student import multi_hot
from kiwb.kinds.multitask.consensus import mean_logit_targets
from kiwb.kinds.multitask.data import check_known
from kiwb.kinds.multitask.heads import Head, output_name
from kiwb.kinds.multitask.scoring import FEATURES
from kiwb.kinds.multitask.teachers import task_labels, task_teachers
from kiwb.kinds.sequence.integration import TeacherScores, integrate_pool, scores_from_arrays
from kiwb.project.config import ProjectConfig, TaskConfig
from kiwb.project.records import GoldLabelUse, IntegrationSettings
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.stored_scores import load_scores

MEAN = "mean"  # VENUS' consensus
LABEL_ROUTING = "confidence"  # multi-label tasks compare owners per label (kiwb.kinds.multilabel)


def task_text(task: str, text: str) -> str:
    """How a text of one task reads in the conflicts list and the labels store."""
    return f"[{task}] {text}"


@dataclass
class TaskPart:
    """One task on one data set: its teachers' heads' arrays, its labels and gold."""

    task: TaskConfig
    labels: list[str]          # the student's slice for the task, in order
    teachers: list[str]
    heads: list[Head]
    arrays: list[dict]         # per teacher, the head's arrays without the "<task>/" prefix
    score_keys: list[str]
    texts: list[str]           # "[task] text" (single-label), the texts (multi-label)
    gold: list | None          # per text: a label (single-label) or a tuple of labels
    # labels, the heads' and the gold are named "task/label" (kiwb.kinds.multitask.heads)

    @property
    def multi(self) -> bool:
        return self.task.kind == "multi-label"

    def single_scores(self) -> TeacherScores:
        """A single-label task's scores as a single-label project's (its union in teacher order)."""
        return scores_from_arrays(self.teachers, [head.labels for head in self.heads], self.arrays,
                                  self.gold, self.score_keys)

    def label_data(self) -> LabelData:
        scores = stack_label_scores(self.teachers, [list(head.labels) for head in self.heads],
                                    self.arrays)
        gold = multi_hot(self.gold, scores.union) if self.gold is not None else None
        return LabelData(scores, self.texts, gold, self.score_keys)


@dataclass
class TaskData:
    """One data set of a multi-task project: its texts, each task's part, each teacher's
    pooled features."""

    texts: list[str]
    parts: dict[str, TaskPart]
    features: dict[str, np.ndarray]  # teacher -> (n, hidden)
    score_keys: list[str]


def task_data(config: ProjectConfig, store: Store, tasks: list[ScoreTask], role: str) -> TaskData:
    """The stored scores of one data set's score tasks (one per teacher), split per task."""
    if any(len(store.done_shards(task.key)) < task.num_shards for task in tasks):
        raise KiwbError(f"no complete teacher scores for the {role} data yet; run: "
                        + command("score", config.root))
    teachers = [task.teacher for task in tasks]
    arrays = {task.teacher.name: load_scores(config, store, task) for task in tasks}
    table = tasks[0].table
    gold = table.task_gold or {}
    parts = {}
    for task in config.tasks:
        answered = task_teachers(teachers, task.name)
        found = gold.get(task.name)
        multi = task.kind == "multi-label"
        if found is not None:  # integration reads the gold on what its teachers know
            known = list(dict.fromkeys(x for _, head in answered for x in head.labels))
            check_known(found, known, task.name, table.source, multi)
        # labels are named as the student's outputs ("task/label"), the labels store's names
        named = [[output_name(task.name, label) for label in head.labels] for _, head in answered]
        if found is not None:
            found = [tuple(output_name(task.name, x) for x in value) if multi
                     else output_name(task.name, value) for value in found]
        prefix = f"{task.name}/"
        parts[task.name] = TaskPart(
            task=task,
            labels=[output_name(task.name, label) for label in task_labels(task, answered)],
            teachers=[teacher.name for teacher, _ in answered],
            heads=[dataclasses.replace(head, labels=tuple(labels))
                   for (_, head), labels in zip(answered, named, strict=True)],
            arrays=[{name[len(prefix):]: values for name, values in arrays[teacher.name].items()
                     if name.startswith(prefix)} for teacher, _ in answered],
            score_keys=[next(t.key for t in tasks if t.teacher.name == teacher.name)
                        for teacher, _ in answered],
            # a single-label task's conflict is a text; a multi-label task's a (text, label)
            # pair, "[task/label] text", already of one task
            texts=list(table.texts) if multi else [task_text(task.name, t) for t in table.texts],
            gold=found)
    return TaskData(table.texts, parts, {name: values[FEATURES] for name, values in arrays.items()},
                    [task.key for task in tasks])


@dataclass
class TaskTargets:
    """One task's integrated targets on its labels, and what the integration found."""

    targets: torch.Tensor        # (n, C) probabilities on the task's labels
    weights: torch.Tensor        # (n,) single-label, (n, C) multi-label
    margin: torch.Tensor | None  # (n,) or (n, C) where several teachers answer it
    routed: torch.Tensor | None
    summary: dict | None         # its own kind's IntegrationSummary, as a dict
    conflicts: list[tuple]       # (margin, routed, class index, gold, details, text)
    fingerprint: str | None = None  # of the labels given to its conflicts, when used


def _reordered(values: torch.Tensor, source: list[str], labels: list[str]) -> torch.Tensor:
    """(n, len(source)) columns placed in the order of `labels` (0 where source lacks one)."""
    out = values.new_zeros(values.shape[0], len(labels))
    index = {label: i for i, label in enumerate(source)}
    for column, label in enumerate(labels):
        if label in index:
            out[:, column] = values[:, index[label]]
    return out


def task_settings(settings: IntegrationSettings, part: TaskPart) -> IntegrationSettings:
    """The project's settings as this task's kind takes them: multi-label tasks route per
    label by confidence; the consensus "mean" routes as the default does (for the conflicts
    list and figures; its targets are the mean)."""
    method = "muki-hard" if settings.method == MEAN and not part.multi else settings.method
    routing = LABEL_ROUTING if part.multi else settings.routing
    return dataclasses.replace(settings, method=method, routing=routing)


def integrate_task(part: TaskPart, settings: IntegrationSettings, store: Store,
                   evaluation: TaskPart | None) -> TaskTargets:
    """One task's targets under `settings` (see the module's docstring)."""
    if part.multi:
        return _integrate_labels(part, settings, store, evaluation)
    return _integrate_single(part, settings, store, evaluation)


def _integrate_single(part, settings, store, evaluation) -> TaskTargets:
    from kiwb.kinds.sequence.integration import eval_summary, summarize

    scores = part.single_scores()
    if len(part.teachers) == 1:
        targets = _reordered(scores.det_probs[0], list(part.heads[0].labels), part.labels)
        return TaskTargets(targets, torch.ones(len(part.texts)), None, None, None, [])
    chosen = task_settings(settings, part)
    pool = integrate_pool(chosen, store, scores, part.texts, None)
    targets, weights = pool.result.targets, pool.result.weights
    if settings.method == MEAN:
        targets = mean_logit_targets(scores.det_logits, scores.positions, len(scores.labels))
        weights = torch.ones(len(part.texts)) if pool.gold is None else _mean_weights(pool)
        if pool.gold is not None and len(pool.gold.rows):
            targets[pool.gold.rows] = torch.nn.functional.one_hot(
                pool.gold.label_ids, len(scores.labels)).float()
    summary = summarize(scores, pool, chosen)
    if pool.gold is not None:  # as a single-label project's record says what labels did
        summary = dataclasses.replace(summary, gold_labels=GoldLabelUse(
            labeled=len(pool.gold.rows), left_out=len(pool.gold.left_out),
            routing_labels=len(pool.routing_labels.true_labels) if pool.routing_labels else 0,
            eval_left_out=0, fingerprint=pool.gold.fingerprint))
    if evaluation is not None and evaluation.gold is not None:
        summary = dataclasses.replace(summary, eval=eval_summary(evaluation.single_scores(),
                                                                 pool.fitted))
    column = {label: i for i, label in enumerate(part.labels)}
    conflicts = []
    target_ids = targets.argmax(-1).tolist()
    for row, margin in enumerate(pool.result.margin.tolist()):
        routed = int(pool.result.routed[row])
        answers = [head.labels[int(part.arrays[t]["det_probs"][row].argmax())]
                   for t, head in enumerate(part.heads)]
        details = {"task": part.task.name, "teachers": part.teachers, "answers": answers,
                   "decided": scores.labels[target_ids[row]],
                   "confidence": scores.mc_confidence[row].tolist() if chosen.use_mc
                   else scores.det_confidence[row].tolist()}
        gold = column.get(part.gold[row]) if part.gold is not None else None
        conflicts.append((margin, routed, column[scores.labels[target_ids[row]]], gold, details,
                          part.texts[row]))
    return TaskTargets(_reordered(targets, scores.labels, part.labels), weights,
                       pool.result.margin, pool.result.routed, summary.to_dict(), conflicts,
                       pool.gold.fingerprint if pool.gold is not None else None)


def _mean_weights(pool) -> torch.Tensor:
    """Weight 1 per text under the mean consensus, 0 for texts labeled none of these labels."""
    weights = torch.ones(len(pool.result.margin))
    weights[pool.gold.left_out] = 0.0
    return weights


def _integrate_labels(part, settings, store, evaluation) -> TaskTargets:
    from kiwb.kinds.multilabel.summary import label_summary

    data = part.label_data()
    chosen = task_settings(settings, part)
    if len(part.teachers) == 1:  # one owner per label: its answers, weight 1
        chosen = dataclasses.replace(chosen, reweight=False)
    # Raw margins and the configured minimum steps: the multi-label kind's side-balanced
    # margins and longer budget cost the multi-task demo's topic task 6.6 points (96.8% ->
    # 90.2%) for 4.1 on its tags (BENCHMARKS.md, "Students that fit their targets").
    pool = integrate_label_pool(chosen, store, data, balance_sides=False)
    union = data.union
    targets = _reordered(pool.result.targets, union, part.labels)
    weights = _reordered(pool.result.weights, union, part.labels)
    summary = None
    conflicts = []
    if len(part.teachers) > 1:
        eval_data = evaluation.label_data() if evaluation is not None and evaluation.gold else None
        summary = label_summary(data, pool, chosen, eval_data).to_dict()
        column = {label: i for i, label in enumerate(part.labels)}
        for conflict in label_conflicts(data.scores, pool.result):
            label = union.index(conflict.label)
            owners = [t for t in range(len(part.teachers)) if data.scores.owners[t, label]]
            details = {"task": part.task.name, "teachers": [part.teachers[t] for t in owners],
                       "answers": [f"{conflict.label} "
                                   f"{'yes' if data.scores.det_probs[t, conflict.text, label] > 0.5 else 'no'}"
                                   for t in owners],
                       "decided": f"{conflict.label} {'yes' if conflict.target > 0.5 else 'no'}",
                       "confidence": [float(data.scores.mc_confidence[t, conflict.text, label])
                                      for t in owners]}
            gold = None
            if data.gold is not None and data.gold[conflict.text, label]:
                gold = column[conflict.label]
            conflicts.append((conflict.margin, int(pool.result.routed[conflict.text, label]),
                              column[conflict.label], gold, details,
                              pair_text(conflict.label, part.texts[conflict.text])))
    return TaskTargets(targets, weights, pool.result.margin, pool.result.routed, summary,
                       conflicts, pool.fingerprint)


def task_eval(part: TaskPart, settings: IntegrationSettings) -> dict | None:
    """A task's untrained references on a labeled data set: its teachers' Ensemble (a
    single-label task's softmax over their concatenated logits; a multi-label task's owners'
    mean probability at 0.5: micro F1) and each teacher alone (None without gold labels)."""
    if part.gold is None:
        return None
    if part.multi:
        from kiwb.kinds.multilabel.summary import eval_figures

        figures, _ = eval_figures(part.label_data(), task_settings(settings, part))
        return {"ensemble": figures.ensemble_accuracy, "teachers": figures.teacher_accuracy}
    from kiwb.kinds.sequence.integration import ensemble_accuracy, teacher_accuracies

    scores = part.single_scores()
    return {"ensemble": ensemble_accuracy(scores),
            "teachers": teacher_accuracies(scores, scores.true_label_ids())}
