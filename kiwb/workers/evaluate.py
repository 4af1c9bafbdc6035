"""`kiwb evaluate`: a trained student's figures on any labeled data set."""

from __future__ import annotations

from pathlib import Path

import torch

from kiwb.errors import KiwbError
from kiwb.kinds import kind_named, run_seam
from kiwb.workers.data import TextTable
from kiwb.workers.runtime import load_classifier
from kiwb.workers.student import evaluate, tokenize


def evaluate_checkpoint(checkpoint: Path, table: TextTable, device: torch.device,
                        batch_size: int, max_length: int) -> dict:
    """A trained student's figures on `table`, as its kind measures them (kiwb.kinds): the
    headline figure (accuracy, or a tagger's entity F1) under "accuracy"."""
    from kiwb.workers.predict import folder_kind

    return run_seam(kind_named(folder_kind(checkpoint)), "evaluate", checkpoint, table, device, batch_size,
                    max_length)


def evaluate_classifier(checkpoint: Path, table: TextTable, device: torch.device,
                        batch_size: int, max_length: int) -> dict:
    """The sequence kind's evaluation seam: accuracy, macro-F1, per-class accuracy and
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
