"""The student of a multi-task project: one encoder, one classifier whose outputs are laid end
to end, one slice per task (`task_heads` in its config.json: a plain
*ForSequenceClassification that transformers loads without remote code), and while it trains,
one feature adapter per teacher (VENUS' feature consolidator).

An adapter maps the student's pooled feature (the mean of its last hidden states) to a
teacher's pooled feature, so teachers of any width teach the shared backbone. VENUS' adapter
is ReLU(W F + b) for a CNN's non-negative features; a transformer's pooled states are signed,
so the adapter here is linear, and each teacher's features are standardised per dimension over
the pool (every dimension and teacher then counts alike). Adapters are kept in the training
checkpoints (to resume) and left out of the export: serving needs none.
"""

from __future__ import annotations

import numpy as np
import torch

from kiwb.core.learning_check import (
    OK,
    LearningCheck,
    check_on_eval,
    check_on_pool,
    versus_reference,
)
from kiwb.core.metrics import classification_report
from kiwb.core.target_fit import agreement, decisive_yes, thresholded_fit
from kiwb.errors import KiwbError
from kiwb.kinds.multilabel.check import check_label_rates
from kiwb.kinds.multilabel.metrics import multilabel_report
from kiwb.kinds.multilabel.student import set_head_bias
from kiwb.kinds.multilabel.thresholds import DEFAULT_THRESHOLD, decide, tune_thresholds
from kiwb.kinds.multitask.data import MISSING, gold_of
from kiwb.kinds.multitask.heads import CONFIG_KEY, Head, heads_of_config, output_name
from kiwb.kinds.multitask.losses import (
    feature_loss,
    gold_task_losses,
    split_features,
    task_losses,
)
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.workers.feature_adapters import ADAPTERS, attach_adapters, load_adapter_weights
from kiwb.workers.representation import mean_pooled
from kiwb.workers.runtime import FittedBatch, load_classifier
from kiwb.workers.student import (
    collate,
    load_student_base,
    predict_logits,
    tokenize,
)


def task_answers(heads, logits: torch.Tensor, thresholds: dict | None = None) -> dict:
    """Per task: a single-label task's (n,) label ids and (n, C) softmax, a multi-label task's
    (n, C) 0/1 decisions at the thresholds and (n, C) sigmoids."""
    thresholds = thresholds or {}
    found = {}
    for head in heads:
        values = logits[:, head.start:head.stop]
        if head.kind == "single-label":
            probs = values.softmax(-1)
            found[head.task] = (probs.argmax(-1), probs)
        else:
            probs = values.sigmoid()
            cut = torch.tensor([float(thresholds.get(output_name(head.task, label),
                                                     DEFAULT_THRESHOLD)) for label in head.labels])
            found[head.task] = (decide(probs, cut), probs)
    return found


def task_report(heads, logits: torch.Tensor, gold: torch.Tensor,
                thresholds: dict | None = None) -> dict:
    """Per task with gold labels: its headline (accuracy, or micro F1 at the thresholds), macro
    F1, per-class figures and, for a single-label task, its confusion."""
    answers = task_answers(heads, logits, thresholds)
    report = {}
    for head in heads:
        columns = gold[:, head.start:head.stop]
        rows = (columns != MISSING).all(1)
        if not bool(rows.any()):
            continue
        predicted, _ = answers[head.task]
        if head.kind == "single-label":
            found = classification_report(predicted[rows], columns[rows].argmax(-1),
                                          list(head.labels))
            report[head.task] = {"kind": head.kind, "headline": found["accuracy"],
                                 "macro_f1": found["macro_f1"],
                                 "per_class": found["per_class_accuracy"],
                                 "confusion": found["confusion"], "texts": int(rows.sum())}
        else:
            found = multilabel_report(columns[rows], predicted[rows], list(head.labels))
            report[head.task] = {"kind": head.kind, "headline": found["micro_f1"],
                                 "macro_f1": found["macro_f1"], "per_class": found["per_label_f1"],
                                 "texts": int(rows.sum())}
    return report


class MultiTaskStudent(SequenceStudent):
    """What the Trainer asks of a multi-task student (see SequenceStudent). It holds the task
    layout, the teachers' feature widths and the feature loss's weight: no tensors but the
    multi-label slices' starting bias."""

    kind = "multi-task"

    def __init__(self, heads: tuple[Head, ...], widths: tuple[int, ...] = (),
                 feature_weight: float = 0.0, head_bias: torch.Tensor | None = None):
        self.heads = tuple(heads)
        self.widths = tuple(widths)  # per teacher, in project order; () without the feature loss
        self.feature_weight = feature_weight
        self.head_bias = head_bias

    @property
    def outputs(self) -> int:
        return self.heads[-1].stop

    @property
    def uses_features(self) -> bool:
        return bool(self.widths) and self.feature_weight > 0

    # -- the model ------------------------------------------------------------------
    def load_base(self, base: str, labels: list[str]):
        model, tokenizer = load_student_base(base, labels)
        model.config.problem_type = None  # no one head: each slice says softmax or sigmoid
        setattr(model.config, CONFIG_KEY, [head.to_dict() for head in self.heads])
        if self.head_bias is not None:
            set_head_bias(model, self.head_bias)
        if self.uses_features:
            attach_adapters(model, list(self.widths))
        return model, tokenizer

    def load_checkpoint(self, folder):
        model = load_classifier(folder, kind=self.kind)
        if self.uses_features:
            attach_adapters(model, list(self.widths))
            load_adapter_weights(model, folder)
        return model

    def logits(self, model, tokenizer, features, rows, device: torch.device) -> torch.Tensor:
        """(rows, outputs [+ the teachers' feature widths]) : the task outputs, then (while the
        feature loss trains) each adapter's prediction of its teacher's pooled feature."""
        inputs = collate(tokenizer, features, rows, device)
        if not self.uses_features:
            return model(**inputs).logits.float()
        found = model(**inputs, output_hidden_states=True)
        pooled = mean_pooled(found.hidden_states[-1], inputs.get("attention_mask"))
        adapters = getattr(getattr(model, "module", model), ADAPTERS)
        return torch.cat([found.logits.float(), *(adapter(pooled).float() for adapter in adapters)],
                         dim=1)

    # -- the losses -----------------------------------------------------------------
    def loss_parts(self, logits, targets, weights) -> dict[str, torch.Tensor]:
        """Each task's loss, the feature loss (while it trains) and their total."""
        outputs = self.outputs
        parts = task_losses(self.heads, logits[:, :outputs], targets[:, :outputs],
                            weights[:, :outputs])
        total = torch.stack(list(parts.values())).sum()
        if self.uses_features:
            parts["features"] = feature_loss(split_features(logits, outputs, self.widths),
                                             split_features(targets, outputs, self.widths))
            total = total + self.feature_weight * parts["features"]
        parts["total"] = total
        return parts

    def distillation_loss(self, method, logits, targets, weights, coverage=None):
        return self.loss_parts(logits, targets, weights)["total"]

    def supervised_loss(self, logits, gold):
        return gold_task_losses(self.heads, logits[:, :self.outputs], gold)

    # -- evaluation and the learning check ------------------------------------------
    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        """Per task: accuracy or micro F1 (at thresholds tuned here, kept in the model's config
        as label_thresholds), macro F1, per-class figures. The headline ("accuracy", which picks
        the best checkpoint) is the tasks' mean headline."""
        logits = predict_logits(model, tokenizer, features, batch, device, autocast_dtype)
        thresholds = {}
        for head in self.heads:
            gold = data.eval_ids[:, head.start:head.stop]
            rows = (gold != MISSING).all(1)
            if head.kind == "multi-label" and bool(rows.any()):
                tuned = tune_thresholds(logits[rows, head.start:head.stop].sigmoid(), gold[rows])
                thresholds.update({output_name(head.task, label): value for label, value in
                                   zip(head.labels, tuned.tolist(), strict=True)})
        model.config.label_thresholds = thresholds or None
        # the headline at 0.5, as a multi-label student's: thresholds tuned on these texts
        # would flatter them; the tuned figure is reported beside it
        report = task_report(self.heads, logits, data.eval_ids)
        for task, figures in task_report(self.heads, logits, data.eval_ids, thresholds).items():
            if figures["kind"] == "multi-label":
                report[task]["tuned_micro_f1"] = figures["headline"]
        per_class = {output_name(task, label): value for task, figures in report.items()
                     for label, value in figures["per_class"].items()}
        counts = self._counts(logits)
        return {"accuracy": float(np.mean([r["headline"] for r in report.values()])),
                "macro_f1": float(np.mean([r["macro_f1"] for r in report.values()])),
                "per_class_accuracy": per_class, "confusion": [],
                "num_texts": len(data.eval_texts),
                "details": {"tasks": report, "thresholds": thresholds},
                "predicted_counts": counts}

    def _counts(self, logits, thresholds=None) -> list[int]:
        counts = []
        for head in self.heads:
            predicted, _ = task_answers([head], logits, thresholds)[head.task]
            counts += (torch.bincount(predicted, minlength=len(head.labels)).tolist()
                       if head.kind == "single-label" else predicted.sum(0).tolist())
        return counts

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        """How many texts the student gives each output (per task, as the task decides)."""
        return self._counts(predict_logits(model, tokenizer, features, batch, device,
                                           autocast_dtype))

    def min_steps(self, data, batch_size: int, configured: int) -> tuple[int, str]:
        """`configured` ([training] min_steps) for each task: the heads learn from the same
        steps, each from its own slice of the loss. On the multi-task demo, two seeds, 300
        steps against 600: heads only 80.5 / 80.8% topic (seed 0 never said travel) against
        90.5 / 91.5%; every student's mean task score rose (BENCHMARKS.md, "A budget per task").
        `configured` 0 (train exactly the epochs) stays 0."""
        tasks = len(self.heads)
        if not configured or tasks < 2:
            return configured, ""
        return configured * tasks, (f"{tasks} task heads learn from the same steps: "
                                    "min_steps for each")

    def fit(self, model, tokenizer, features, data, rows, batch, device, autocast_dtype) -> dict:
        """Per task, how well the student reproduces its targets (the gold labels, supervised)
        on the pool rows `rows`: a single-label task's agreement with their top class, a
        multi-label task's micro F1 at 0.5. The headline "fit" is the task fitting worst."""
        logits = predict_logits(model, tokenizer, [features[int(row)] for row in rows], batch,
                                device, autocast_dtype)
        taught = (data.label_ids if data.label_ids is not None else data.targets)[rows].float()
        per_task = {}
        for head in self.heads:
            mine, theirs = logits[:, head.start:head.stop], taught[:, head.start:head.stop]
            known = (theirs != MISSING).all(1)  # a supervised row without this task's label
            if not bool(known.any()):
                continue
            mine, theirs = mine[known], theirs[known]
            per_task[head.task] = (agreement(mine.argmax(-1), theirs.argmax(-1))
                                   if head.kind == "single-label" else
                                   thresholded_fit(mine.sigmoid(), theirs))
        return {"fit": min(per_task.values()) if per_task else None, "fit_per_task": per_task}

    def target_shares(self, data) -> torch.Tensor:
        """Per output: the share of taught texts whose target is that class (single-label) or
        decidedly says yes to that label (multi-label: kiwb.core.target_fit.decisive_yes)."""
        taught = data.label_ids if data.label_ids is not None else data.targets
        shares = []
        for head in self.heads:
            values = taught[:, head.start:head.stop].float()
            if head.kind == "single-label":
                top = values.argmax(-1)
                shares.append(torch.bincount(top, minlength=len(head.labels)).float()
                              / max(1, len(top)))
            else:
                shares.append(decisive_yes(values).float().mean(0))
        return torch.cat(shares)

    def eval_check(self, data, metrics: dict, target_shares: list[float]) -> LearningCheck:
        """Each task's own check (a single-label task's against its eval confusion, a
        multi-label task's label rates); the first that flags a problem, named by its task."""
        report = metrics["details"]["tasks"]
        checks = []
        for head in self.heads:
            shares = target_shares[head.start:head.stop]
            if head.task not in report:
                continue
            if head.kind == "single-label":
                checks.append((head.task, check_on_eval(list(head.labels),
                                                        report[head.task]["confusion"],
                                                        target_shares=shares)))
            else:
                counts = metrics["predicted_counts"][head.start:head.stop]
                checks.append((head.task, check_label_rates(list(head.labels), counts,
                                                            report[head.task]["texts"], shares,
                                                            "eval texts")))
        # then each head against its task's untrained reference, in the same words
        task_references = (data.eval_reference or {}).get("tasks") or {}
        for head in self.heads:
            if head.task in report and head.task in task_references:
                reference = task_references[head.task]
                checks.append((head.task, versus_reference(
                    report[head.task]["headline"], reference["accuracy"], reference["name"],
                    metric="" if head.kind == "single-label" else "micro F1")))
        flagged = _first_flagged(checks)
        if flagged.flagged:
            return flagged
        reference = data.eval_reference or {}
        return versus_reference(metrics["accuracy"], reference.get("accuracy"),
                                reference.get("name") or "the tasks' Ensembles")

    def pool_check(self, data, predicted_counts: list[int],
                   target_shares: list[float]) -> LearningCheck:
        checks = []
        for head in self.heads:
            counts = predicted_counts[head.start:head.stop]
            shares = target_shares[head.start:head.stop]
            checks.append((head.task, check_on_pool(list(head.labels), counts, shares)
                           if head.kind == "single-label" else
                           check_label_rates(list(head.labels), counts, None, shares,
                                             "pool texts")))
        return _first_flagged(checks)


def _first_flagged(checks: list[tuple[str, LearningCheck]]) -> LearningCheck:
    for task, check in checks:
        if check.status != OK:
            return LearningCheck(check.status, check.collapsed,
                                 f"task {task}: {check.problem}", check.hint)
    return LearningCheck(OK)


# -- a trained or exported model, read back ------------------------------------------------

def load_multitask(folder):
    """A multi-task model, its tokenizer and its heads (from task_heads in config.json)."""
    from transformers import AutoTokenizer

    model = load_classifier(folder, kind="multi-task")
    outputs = [model.config.id2label[i] for i in range(model.config.num_labels)]
    try:
        heads = heads_of_config(model.config.to_dict(), outputs)
    except ValueError as error:
        raise KiwbError(f"{folder} {error}") from None
    return model, AutoTokenizer.from_pretrained(folder), heads


def evaluate_classifier(checkpoint, table, device: torch.device, batch_size: int,
                        max_length: int) -> dict:
    """The multi-task kind's evaluate: each task's figures on a table with its tasks'
    gold labels (read by the project's [[tasks]])."""
    if not table.task_gold:
        raise KiwbError(f"{table.source}: evaluating a multi-task student needs each task's gold "
                        "labels, in a column per task named by the project's [[tasks]]")
    model, tokenizer, heads = load_multitask(checkpoint)
    gold = gold_of(heads, table)
    model.to(device)
    logits = predict_logits(model, tokenizer, tokenize(tokenizer, table.texts, max_length),
                            FittedBatch(batch_size), device)
    report = task_report(heads, logits, gold, getattr(model.config, "label_thresholds", None))
    # a multi-label task's figures at 0.5 beside: its saved thresholds were tuned on the
    # project's eval texts, where they flatter it (kiwb.kinds.multilabel's evaluation says so)
    for task, figures in task_report(heads, logits, gold).items():
        if figures["kind"] == "multi-label":
            report[task]["at_half"] = {"micro_f1": figures["headline"],
                                       "macro_f1": figures["macro_f1"]}
    return {"accuracy": float(np.mean([r["headline"] for r in report.values()])),
            "per_class_accuracy": {output_name(task, label): value
                                   for task, figures in report.items()
                                   for label, value in figures["per_class"].items()},
            "macro_f1": float(np.mean([r["macro_f1"] for r in report.values()])),
            "tasks": report, "num_texts": len(table.texts), "kind": "multi-task"}
