"""Tiny teachers fine-tuned from one base, as weight merging needs them: a base that learnt all
four topics (standing in for pre-training), then each teacher fine-tuned from it on its own
half with a new head, at a fine-tuning learning rate."""

from __future__ import annotations

from pathlib import Path

from tiny import (
    TEACHER_A_LABELS,
    TEACHER_B_LABELS,
    TOPICS,
    make_texts,
    tiny_bert_config,
    train_classifier,
    wordpiece_tokenizer,
)


def build_merge_family(root: Path) -> dict[str, Path]:
    """{"base", "a", "b"}: the base and two teachers fine-tuned from it (BERT, WordPiece)."""
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(root)
    base = BertForSequenceClassification(tiny_bert_config(tuple(TOPICS), len(tokenizer)))
    train_classifier(base, tokenizer, make_texts(240, seed=31), tuple(TOPICS), epochs=4)
    folders = {"base": root / "base"}
    base.save_pretrained(folders["base"])
    tokenizer.save_pretrained(folders["base"])
    for name, labels, seed in (("a", TEACHER_A_LABELS, 32), ("b", TEACHER_B_LABELS, 33)):
        torch.manual_seed(seed)
        teacher = BertForSequenceClassification.from_pretrained(
            folders["base"], id2label=dict(enumerate(labels)),
            label2id={label: i for i, label in enumerate(labels)}, ignore_mismatched_sizes=True)
        train_classifier(teacher, tokenizer, make_texts(160, seed=seed), labels, epochs=3,
                         learning_rate=5e-4)
        folders[name] = root / f"teacher_{name}"
        teacher.save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    return folders
