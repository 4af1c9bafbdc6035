"""Building the multi-label demo project offline: texts of one or two of the text demo's
topics with their topics as labels, the tiny pre-trained base (kiwb.demo.build's), two sigmoid
teachers that share two labels, and the multi-label project.

A teacher is a sequence classifier with a sigmoid per label (problem_type
multi_label_classification) fine-tuned from the base on every teaching text, told yes or no
for its own labels only: another teacher's topics are simply not its questions, as for a
released tagger. Every part is written atomically and reused when a later run finds it.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import torch

from kiwb.console import progress_bar
from kiwb.demo.build import build_steps
from kiwb.demo.build import write_project as write_text_demo_project
from kiwb.demo.corpus import generate, split_by_label
from kiwb.demo.multilabel_recipe import TEACHERS, MultiLabelRecipe
from kiwb.demo.recipe import DemoPaths
from kiwb.project.atomic import atomic_directory, atomic_write_text

SPLITS = ("teach", "pool", "eval")  # eval last: its presence means all are written
PROBLEM_TYPE = "multi_label_classification"


def build_multilabel_demo(root: Path, recipe: MultiLabelRecipe,
                          device: torch.device) -> dict[str, float | None]:
    """Make (or finish) the multi-label demo project in `root`; the seconds each step took,
    None if reused."""
    return build_steps(root, recipe, device, write_corpus=write_corpus, read_splits=read_splits,
                       teachers=TEACHERS, train_teacher=train_teacher, write_project=write_project)


# -- corpus ----------------------------------------------------------------------------------
def join_topics(rows: list[dict], share: float, rng: random.Random) -> list[dict]:
    """Texts of one topic, a `share` of them joined with a text of another topic (which is
    then used up): {"text", "labels"} rows, the labels in the corpus's topic order."""
    pool = list(rows)
    rng.shuffle(pool)
    joined = []
    while pool:
        first = pool.pop()
        other = next((i for i, row in enumerate(pool) if row["label"] != first["label"]), None)
        if other is not None and rng.random() < share:
            second = pool.pop(other)
            labels = sorted({first["label"], second["label"]})
            joined.append({"text": f"{first['text']} {second['text']}", "labels": labels})
        else:
            joined.append({"text": first["text"], "labels": [first["label"]]})
    return joined


def write_corpus(paths: DemoPaths, recipe: MultiLabelRecipe) -> dict[str, list[dict]]:
    """Generate the texts, split them by topic, join topics per split and write the splits;
    the pool is written without labels."""
    per_label = sum(recipe.split_sizes.values())
    rows = generate(per_label, seed=recipe.seed, mixed_share=recipe.mixed_share)
    parts = split_by_label(rows, recipe.split_sizes, seed=recipe.seed)
    rng = random.Random(recipe.seed)
    splits = {name: join_topics(parts[name], recipe.two_topic_share, rng) for name in SPLITS}
    for name in SPLITS:
        keep = ("text",) if name == "pool" else ("text", "labels")
        lines = [json.dumps({key: row[key] for key in keep}) + "\n" for row in splits[name]]
        atomic_write_text(paths.split(name), "".join(lines))
    return splits


def read_splits(paths: DemoPaths) -> dict[str, list[dict]]:
    return {name: [json.loads(line) for line in
                   paths.split(name).read_text(encoding="utf-8").splitlines()]
            for name in SPLITS}


# -- teachers and the project ----------------------------------------------------------------
def train_teacher(paths: DemoPaths, name: str, labels: tuple[str, ...], rows: list[dict],
                  recipe: MultiLabelRecipe, device: torch.device) -> None:
    """Fine-tune the base as a sigmoid classifier of `labels` (binary cross-entropy per label)
    on every teaching text, for the recipe's epochs."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(recipe.seed)
    tokenizer = AutoTokenizer.from_pretrained(paths.base)
    model = AutoModelForSequenceClassification.from_pretrained(
        paths.base, num_labels=len(labels), problem_type=PROBLEM_TYPE,
        id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
        hidden_dropout_prob=recipe.dropout, attention_probs_dropout_prob=recipe.dropout).to(device)
    encoded = tokenizer([row["text"] for row in rows], truncation=True,
                        max_length=recipe.max_length, padding=True, return_tensors="pt")
    gold = torch.tensor([[float(label in row["labels"]) for label in labels] for row in rows])
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.teacher_learning_rate)
    per_epoch = math.ceil(len(rows) / recipe.batch_size)
    total = math.ceil(per_epoch * recipe.teacher_epochs)
    generator = torch.Generator().manual_seed(recipe.seed)
    model.train()
    with progress_bar(f"teacher {name}", total=total, unit="steps") as advance:
        order = torch.empty(0, dtype=torch.long)
        for step in range(total):
            if step % per_epoch == 0:
                order = torch.randperm(len(rows), generator=generator)
            batch = order[(step % per_epoch) * recipe.batch_size:][:recipe.batch_size]
            logits = model(**{key: value[batch].to(device) for key, value in encoded.items()}).logits
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, gold[batch].to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            advance(f"teacher {name} · loss {loss.item():.3f}", 1)
    model.eval()
    with atomic_directory(paths.teacher(name)) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)


def write_project(paths: DemoPaths, recipe: MultiLabelRecipe) -> Path:
    """The multi-label demo's kiwb.toml: the text demo's writer, with a list of labels per
    eval text."""
    return write_text_demo_project(
        paths, recipe, name="kiwb-demo-multilabel", teachers=TEACHERS,
        columns={"unlabeled": {}, "eval": {"label_column": "labels"}})
