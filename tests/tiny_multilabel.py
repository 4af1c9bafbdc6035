"""Tiny real multi-label teachers and data for tests: texts that mix one or two topics of
tiny.TOPICS carry those topics as labels; a teacher is a tiny sigmoid BERT that knows some."""

from __future__ import annotations

import random
from pathlib import Path

from tiny import FILLER, TOPICS, tiny_bert_config, wordpiece_tokenizer

TEACHER_A_TAGS = ("sports", "politics", "music")  # music is shared
TEACHER_B_TAGS = ("music", "cooking")
PROBLEM_TYPE = "multi_label_classification"


def make_tagged_texts(count: int, seed: int) -> list[dict]:
    """Texts of one topic (half) or two (half), each with its topics as a list of labels."""
    rng = random.Random(seed)
    topics = list(TOPICS)
    rows = []
    for i in range(count):
        chosen = sorted(rng.sample(topics, 1 + i % 2), key=topics.index)
        words = [word for topic in chosen for word in rng.choices(TOPICS[topic].split(), k=rng.randint(3, 5))]
        words += rng.choices(FILLER, k=rng.randint(1, 4))
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "labels": chosen})
    return rows


def train_tagger(model, tokenizer, rows: list[dict], labels, epochs: int = 8, seed: int = 0):
    """A few epochs of binary cross-entropy on the teacher's own labels (as `rows` give them)."""
    import torch

    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for start in range(0, len(rows), 16):
            chunk = rows[start:start + 16]
            batch = tokenizer([r["text"] for r in chunk], padding=True, return_tensors="pt")
            gold = torch.tensor([[float(label in r["labels"]) for label in labels] for r in chunk])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(**batch).logits, gold)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def flipped(rows: list[dict], label: str, share: float, seed: int) -> list[dict]:
    """`rows` with `label` said wrongly (added where absent, dropped where present) on about
    `share` of them: a teacher taught these disagrees with a clean one on that label."""
    rng = random.Random(seed)
    found = []
    for row in rows:
        labels = list(row["labels"])
        if rng.random() < share:
            labels = [x for x in labels if x != label] if label in labels else [*labels, label]
        found.append({**row, "labels": labels})
    return found


def build_multilabel_teacher(folder: Path, labels, *, seed: int = 0,
                             noisy: tuple[str, float] | None = None) -> Path:
    """Save a tiny trained sigmoid teacher (problem_type multi_label_classification); `noisy`
    (label, share) teaches it that label wrongly on a share of its texts."""
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(seed)
    tokenizer = wordpiece_tokenizer(folder)
    model = BertForSequenceClassification(
        tiny_bert_config(labels, len(tokenizer), problem_type=PROBLEM_TYPE))
    rows = make_tagged_texts(240, seed=seed + 1)
    if noisy is not None:
        rows = flipped(rows, *noisy, seed=seed)
    train_tagger(model, tokenizer, rows, labels, seed=seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
