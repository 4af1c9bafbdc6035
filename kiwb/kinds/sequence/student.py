"""The sequence kind's student: one label per text, from a *ForSequenceClassification head
(MUKI as published), and what evaluates and asks a trained one.

SequenceStudent is what the Trainer asks of it (kiwb.workers.student_contract.Student); the
multi-label, multi-task, token and embedding students build on it. It travels with the run's
TrainingData to the other ranks, so it holds no tensors and no model.
"""

from __future__ import annotations

from pathlib import Path

import torch
from rich.markup import escape

from kiwb.console import one_line
from kiwb.core.learning_check import LearningCheck, check_on_eval, check_on_pool
from kiwb.core.losses import softmax_distillation_loss
from kiwb.core.target_fit import agreement, per_teacher_agreement
from kiwb.errors import KiwbError
from kiwb.kinds.sequence import KIND
from kiwb.workers.data import TextTable
from kiwb.workers.runtime import load_classifier
from kiwb.workers.student import (
    collate,
    evaluate,
    load_student_base,
    predict_ids,
    predict_logits,
    tokenize,
)


class SequenceStudent:
    """The student of a sequence project: one label per text. The Trainer reaches everything
    that depends on the kind of student through such an object
    (kiwb.workers.student_contract.Student says what it asks)."""

    kind = KIND.name
    # The losses the Trainer asks for: against gold label ids, and against integrated targets.
    supervised_loss = staticmethod(torch.nn.functional.cross_entropy)
    distillation_loss = staticmethod(softmax_distillation_loss)

    def load_base(self, base: str, labels: list[str]):
        return load_student_base(base, labels)

    def load_checkpoint(self, folder):
        return load_classifier(folder)

    def features(self, tokenizer, data, max_length: int) -> list:
        """The training rows' features: one per pool text."""
        return tokenize(tokenizer, data.texts, max_length)

    def eval_features(self, tokenizer, data, max_length: int) -> list:
        return tokenize(tokenizer, data.eval_texts, max_length)

    def logits(self, model, tokenizer, features, rows, device: torch.device) -> torch.Tensor:
        """(rows, |Y|) logits of the rows' texts."""
        return model(**collate(tokenizer, features, rows, device)).logits.float()

    def loss_units(self, features, rows) -> int:
        """The loss terms of the rows: one per text."""
        return len(rows)

    def row_targets(self, data, rows, features=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' targets and instance weights, in the order `logits` gives them."""
        return data.targets[rows], data.weights[rows]

    def row_gold(self, data, rows, features=None) -> torch.Tensor:
        return data.label_ids[rows]

    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        return evaluate(model, tokenizer, features, data.eval_ids, data.labels, batch, device,
                        autocast_dtype)

    def fit(self, model, tokenizer, features, data, rows, batch, device, autocast_dtype) -> dict:
        """How well the student reproduces what it was taught on the pool rows `rows`: the
        share whose predicted class is the targets' top class (the gold label, supervised).
        {"fit": share}."""
        logits = predict_logits(model, tokenizer, [features[int(row)] for row in rows], batch,
                                device, autocast_dtype)
        if data.label_ids is None and data.targets.dim() == 3:  # UHC: one target per teacher
            return {"fit": per_teacher_agreement(logits.cpu(), data.targets[rows],
                                                 data.coverage)}
        return {"fit": agreement(logits.argmax(-1), self.target_tops(data)[rows])}

    def min_steps(self, data, batch_size: int, configured: int) -> tuple[int, str]:
        """The run's least number of steps, and why when it is above `configured` ([training]
        min_steps): a softmax student's is the configured one."""
        return configured, ""

    def check_labels(self, data) -> list[str]:
        """The classes the learning check reads: the union labels."""
        return data.labels

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        predicted = predict_ids(model, tokenizer, features, batch, device, autocast_dtype)
        return torch.bincount(predicted, minlength=num_labels).tolist()

    # -- the learning check (kiwb.core.learning_check): what the Trainer asks after each
    # evaluation, or, without an eval set, of the student's predictions on a pool sample.
    def eval_check(self, data, metrics: dict, target_shares: list[float]) -> LearningCheck:
        reference = data.eval_reference or {}
        return check_on_eval(self.check_labels(data), metrics["confusion"],
                             reference.get("per_class"), reference.get("accuracy"),
                             target_shares=target_shares)

    def pool_check(self, data, predicted_counts: list[int],
                   target_shares: list[float]) -> LearningCheck:
        return check_on_pool(self.check_labels(data), predicted_counts, target_shares)

    def target_shares(self, data) -> torch.Tensor:
        """Each class's share of the rows the student is taught: the targets' top class (UHC's
        per-teacher targets averaged first), or the gold labels of a supervised run."""
        top = self.target_tops(data)
        return torch.bincount(top, minlength=len(self.check_labels(data))).float() / max(1, len(top))

    def target_tops(self, data) -> torch.Tensor:
        """Each taught row's class: the targets' top class, or the gold label (supervised)."""
        if data.label_ids is not None:
            return data.label_ids
        targets = data.targets if data.targets.dim() == 2 else data.targets.mean(1)  # (n, |Y|)
        return targets.argmax(-1)


def evaluate_classifier(checkpoint: Path, table: TextTable, device: torch.device,
                        batch_size: int, max_length: int) -> dict:
    """The sequence kind's evaluate: accuracy, macro-F1, per-class accuracy and
    confusion of a classifier on `table`."""
    from transformers import AutoTokenizer

    if table.labels is None:
        raise KiwbError(f"{table.source}: evaluation needs a label column")
    model = load_classifier(checkpoint).to(device)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    index = {label: i for i, label in enumerate(labels)}
    unknown = sorted({label for label in table.labels if label not in index})
    if unknown:
        raise KiwbError(f"{table.source}: labels {', '.join(unknown[:5])} are not among the "
                        f"student's labels ({', '.join(labels)})")
    true_ids = torch.tensor([index[label] for label in table.labels])
    features = tokenize(tokenizer, table.texts, max_length)
    return evaluate(model, tokenizer, features, true_ids, labels, batch_size, device)


@torch.no_grad()
def predict_texts(folder: Path, texts: list[str], top: int = 3) -> list[list[tuple[str, float]]]:
    """The `top` most probable labels of each text, most probable first."""
    from transformers import AutoTokenizer

    model = load_trained_head(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    probs = model(**batch).logits.softmax(-1)
    values, indices = probs.topk(min(top, probs.shape[-1]), dim=-1)
    return [
        [(model.config.id2label[int(i)], float(v)) for v, i in zip(row_v, row_i, strict=True)]
        for row_v, row_i in zip(values, indices, strict=True)
    ]


def load_trained_head(folder: Path):
    """The classifier in `folder`, refused in one line when its head is not in the folder: a
    base encoder loads with a random head, which would answer at random (LABEL_0 ...)."""
    model, info = load_classifier(folder, output_loading_info=True)
    missing = list(info.get("missing_keys") or [])
    if missing:
        raise KiwbError(f"{folder}: has no trained classifier head ({', '.join(missing[:3])} "
                        "missing), so it would answer at random; give a kiwb export, a run's "
                        "checkpoint or a fine-tuned classifier")
    return model.eval()


def predicted_labels(folder: Path, texts: list[str], top: int = 3) -> list[str]:
    """The sequence kind's predict: per text, its top label, the `top` labels with
    their probabilities, and the text's start (Rich markup)."""
    lines = []
    for text, ranked in zip(texts, predict_texts(folder, texts, top=top), strict=True):
        shown = "  ".join(f"{label} {100 * prob:.1f}%" for label, prob in ranked)
        lines.append(f"[bold]{escape(ranked[0][0])}[/bold]\t{escape(shown)}\t{escape(one_line(text)[:60])}")
    return lines
