"""The student model: loading a base with a fresh union-label head, batching, evaluating."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.core.metrics import classification_report
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

    auto_name = kind_named(kind).checkpoints.auto_model
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
