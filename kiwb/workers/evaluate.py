"""`kiwb evaluate`: a trained student's figures on any labeled data set."""

from __future__ import annotations

from pathlib import Path

import torch

from kiwb.errors import KiwbError
from kiwb.workers.data import TextTable
from kiwb.workers.runtime import load_classifier
from kiwb.workers.student import evaluate, tokenize


def evaluate_checkpoint(checkpoint: Path, table: TextTable, device: torch.device,
                        batch_size: int, max_length: int) -> dict:
    """Accuracy, macro-F1, per-class accuracy and confusion of a checkpoint on `table`."""
    from transformers import AutoTokenizer

    if table.tags is not None:  # a token student's: entity F1 on the tagged words
        return evaluate_tagger(checkpoint, table, device, batch_size, max_length)
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


def evaluate_tagger(checkpoint: Path, table: TextTable, device: torch.device, batch_size: int,
                    max_length: int) -> dict:
    """Entity F1 (the headline, in `accuracy`), F1 per type and the rest of a token student's
    figures on a table of words and gold tags."""
    from transformers import AutoTokenizer

    from kiwb.kinds.token.student import evaluation_figures, predict_word_tags
    from kiwb.workers.runtime import FittedBatch

    model = load_classifier(checkpoint, kind="token").to(device)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tags = [model.config.id2label[i] for i in range(model.config.num_labels)]
    types = list(dict.fromkeys(tag[2:] for tag in tags if tag != "O"))
    unknown = sorted({tag[2:] for row in table.tags for tag in row if tag != "O"} - set(types))
    if unknown:
        raise KiwbError(f"{table.source}: entity types {', '.join(unknown[:5])} are not among "
                        f"the student's ({', '.join(types)})")
    predicted = predict_word_tags(model, tokenizer, table.words, max_length,
                                  FittedBatch(batch_size), device)
    report = evaluation_figures(table.tags, [[tags[i] for i in row] for row in predicted], types)
    return {**report, "kind": "token"}
