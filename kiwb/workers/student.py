"""The student model: loading a base with a fresh union-label head, batching, evaluating."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.core.learning_check import LearningCheck, check_on_eval, check_on_pool
from kiwb.core.losses import softmax_distillation_loss
from kiwb.core.metrics import classification_report
from kiwb.core.target_fit import agreement, per_teacher_agreement
from kiwb.errors import KiwbError
from kiwb.kinds import DEFAULT_KIND, kind_named
from kiwb.workers.runtime import (
    FittedBatch,
    autocast_context,
    load_classifier,
    ready_to_pad,
    to_device,
)
from kiwb.workers.shard_scoring import capped_max_length, length_sorted_batches
from kiwb.workers.teachers import resolve_checkpoint

# What each head's Auto class makes, in a refusal's words.
HEAD_WORDS = {"AutoModelForSequenceClassification": "a sequence classifier",
              "AutoModelForTokenClassification": "a token classifier"}


def load_student_base(base: str, labels: list[str], *, kind: str = DEFAULT_KIND):
    """A classifier of the teachers' kind (its head's Auto class) from `base`, with a new head
    over the union labels (or tags), and its tokenizer."""
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    auto_name = kind_named(kind).auto_model
    folder = resolve_checkpoint("student", base, role="student base")
    try:
        config = AutoConfig.from_pretrained(folder)
    except Exception as error:
        raise KiwbError(f"student base {base}: cannot read its config.json ({error})") from None
    if type(config) not in getattr(transformers, auto_name)._model_mapping:
        raise KiwbError(
            f"student base {base}: a {config.model_type!r} model cannot be "
            f"{HEAD_WORDS.get(auto_name, auto_name)}; choose an encoder checkpoint such as BERT, "
            "RoBERTa or MiniLM"
        )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = load_classifier(
        folder, kind=kind, num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)}, ignore_mismatched_sizes=True,
    )
    ready_to_pad(tokenizer, model, f"student base {base}")
    return model, tokenizer


def tokenize(tokenizer, texts: list[str], max_length: int) -> list[dict[str, list[int]]]:
    """Per-text token features, unpadded (batches are padded to their own longest text)."""
    encodings = tokenizer(texts, truncation=True, max_length=capped_max_length(tokenizer, max_length))
    return [{name: encodings[name][row] for name in encodings.keys()} for row in range(len(texts))]


def collate(tokenizer, features: list[dict], rows, device: torch.device) -> dict[str, torch.Tensor]:
    return to_device(tokenizer.pad([features[int(row)] for row in rows], return_tensors="pt"), device)


@torch.no_grad()  # not inference_mode: it runs between training steps of the same model
def predict_logits(model, tokenizer, features, batch_size: int | FittedBatch,
                   device: torch.device, autocast_dtype: str = "float32") -> torch.Tensor:
    """(n, outputs) float32 logits of every feature row, in input order; halves the batch on
    CUDA OOM (a FittedBatch keeps the size that fitted for the next call)."""
    batch = batch_size if isinstance(batch_size, FittedBatch) else FittedBatch(batch_size)
    was_training = model.training
    model.eval()

    def run(size: int) -> np.ndarray:
        found = np.zeros((len(features), model.config.num_labels), dtype=np.float32)
        lengths = [len(feature["input_ids"]) for feature in features]
        for rows in length_sorted_batches(lengths, size):
            found[rows] = model(**collate(tokenizer, features, rows, device)).logits.float().cpu().numpy()
        return found

    try:
        with autocast_context(device, autocast_dtype):
            logits = batch.run(run, device, "evaluating", items=len(features))
    finally:
        model.train(was_training)
    return torch.from_numpy(logits)


def predict_ids(model, tokenizer, features, batch_size: int | FittedBatch,
                device: torch.device, autocast_dtype: str = "float32") -> torch.Tensor:
    """Argmax predictions of the model for every feature row, in input order; halves the
    batch on CUDA OOM (a FittedBatch keeps the size that fitted for the next call)."""
    return predict_logits(model, tokenizer, features, batch_size, device, autocast_dtype).argmax(-1)


def evaluate(model, tokenizer, features, true_ids: torch.Tensor, labels: list[str],
             batch_size: int | FittedBatch, device: torch.device,
             autocast_dtype: str = "float32") -> dict:
    """Accuracy, macro-F1, per-class accuracy and confusion of the model on labeled features
    (under the autocast its training used)."""
    predicted = predict_ids(model, tokenizer, features, batch_size, device, autocast_dtype)
    return classification_report(predicted, true_ids, labels)


class SequenceStudent:
    """The student of a sequence project: one label per text (kiwb's original code paths).

    The Trainer reaches everything that depends on the kind of student through such an object
    (kiwb.workers.student_contract.Student says what it asks; kiwb/kinds/token/student.py has
    the token kind's); it travels with the run's TrainingData to the other ranks, so it holds
    no tensors and no model."""

    kind = DEFAULT_KIND
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
