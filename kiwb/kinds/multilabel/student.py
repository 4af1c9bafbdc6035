"""The student of a multi-label project: a sequence classifier whose head says yes or no per
label (sigmoid), trained with binary cross-entropy per (text, label).

Texts are read, batched and passed through the model as a single-label student's are
(kiwb.workers.student); what differs is the head's problem_type, the losses, the gold labels'
shape ((n, L) 0/1 rather than (n,) ids) and the metrics."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.kinds.multilabel.losses import gold_bce_loss, weighted_bce_loss
from kiwb.kinds.multilabel.metrics import multilabel_report
from kiwb.kinds.multilabel.thresholds import DEFAULT_THRESHOLD, decide
from kiwb.workers.runtime import FittedBatch, autocast_context
from kiwb.workers.shard_scoring import length_sorted_batches
from kiwb.workers.student import SequenceStudent, collate, load_student_base

PROBLEM_TYPE = "multi_label_classification"


def multi_hot(label_sets: list[tuple[str, ...]], labels: list[str]) -> torch.Tensor:
    """(n, L) 0/1 gold from each text's labels; every label must be one of `labels`."""
    index = {label: i for i, label in enumerate(labels)}
    gold = torch.zeros(len(label_sets), len(labels))
    for row, found in enumerate(label_sets):
        gold[row, [index[label] for label in found]] = 1.0
    return gold


@torch.no_grad()  # not inference_mode: it runs between training steps of the same model
def predict_probs(model, tokenizer, features, batch_size: int | FittedBatch,
                  device: torch.device, autocast_dtype: str = "float32") -> torch.Tensor:
    """(n, L) sigmoid probabilities of every feature row, in input order."""
    batch = batch_size if isinstance(batch_size, FittedBatch) else FittedBatch(batch_size)
    was_training = model.training
    model.eval()

    def run(size: int) -> np.ndarray:
        found = np.zeros((len(features), model.config.num_labels), dtype=np.float32)
        lengths = [len(feature["input_ids"]) for feature in features]
        for rows in length_sorted_batches(lengths, size):
            logits = model(**collate(tokenizer, features, rows, device)).logits
            found[rows] = logits.float().sigmoid().cpu().numpy()
        return found

    try:
        with autocast_context(device, autocast_dtype):
            probs = batch.run(run, device, "evaluating", items=len(features))
    finally:
        model.train(was_training)
    return torch.from_numpy(probs)


class MultiLabelStudent(SequenceStudent):
    """What the Trainer asks of a multi-label student (see SequenceStudent)."""

    kind = "multi-label"
    supervised_loss = staticmethod(gold_bce_loss)
    distillation_loss = staticmethod(weighted_bce_loss)

    def __init__(self, thresholds: list[float] | None = None):
        self.thresholds = thresholds  # per label, tuned on dev; None: 0.5 for every label

    def load_base(self, base: str, labels: list[str]):
        model, tokenizer = load_student_base(base, labels)
        # Saved with the model, so an export loads as multi-label and the pipeline applies
        # a sigmoid per label.
        model.config.problem_type = PROBLEM_TYPE
        return model, tokenizer

    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        """Micro F1 (the headline, under "accuracy"), macro F1, F1 per label (under
        "per_class_accuracy" too, for the panes), Hamming loss and subset accuracy."""
        probs = predict_probs(model, tokenizer, features, batch, device, autocast_dtype)
        thresholds = (torch.tensor(self.thresholds) if self.thresholds is not None
                      else DEFAULT_THRESHOLD)
        report = multilabel_report(data.eval_ids, decide(probs, thresholds), data.labels)
        return {"accuracy": report["micro_f1"], "per_class_accuracy": report["per_label_f1"],
                **report}

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        """How many texts the student gives each label."""
        probs = predict_probs(model, tokenizer, features, batch, device, autocast_dtype)
        return decide(probs).sum(0).tolist()
