"""Building the NER demo project offline: tagged sentence files, the tiny pre-trained base
(kiwb.demo.build's, pre-trained on these sentences), two NER teachers and the token project.

A teacher is a token classifier fine-tuned from the base on every teaching sentence, with
only its own entity types tagged: the other half's words are O to it, as they are to a
released tagger that never saw those types. Every part is written atomically and reused
when a later run finds it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from kiwb.console import progress_bar
from kiwb.demo.build import build_steps
from kiwb.demo.build import write_project as write_text_demo_project
from kiwb.demo.ner_corpus import generate_splits
from kiwb.demo.ner_recipe import TEACHERS, NerRecipe
from kiwb.demo.recipe import DemoPaths
from kiwb.project.atomic import atomic_directory, atomic_write_text
from kiwb.workers.training_loop import OptimizerSteps, read_losses

SPLITS = ("teach", "pool", "eval")  # eval last: its presence means all are written
IGNORED = -100  # the label cross-entropy skips: later sub-words, special tokens, padding


def build_ner_demo(root: Path, recipe: NerRecipe, device: torch.device) -> dict[str, float | None]:
    """Make (or finish) the NER demo project in `root`; the seconds each step took, None if
    reused. The base is pre-trained on the sentences' words joined by spaces."""
    return build_steps(root, recipe, device, write_corpus=write_corpus, read_splits=read_splits,
                       teachers=TEACHERS, train_teacher=train_teacher, write_project=write_project,
                       base_texts=lambda splits: {name: [{"text": " ".join(row["tokens"])}
                                                         for row in rows]
                                                  for name, rows in splits.items()})


# -- corpus ----------------------------------------------------------------------------------
def write_corpus(paths: DemoPaths, recipe: NerRecipe) -> dict[str, list[dict]]:
    """Generate the tagged sentences and write their splits; the pool keeps only its words."""
    splits = generate_splits(recipe.split_sizes, seed=recipe.seed,
                             ambiguous_share=recipe.ambiguous_share,
                             unseen_share=recipe.unseen_share)
    for name in SPLITS:
        keep = ("tokens",) if name == "pool" else ("tokens", "tags", "text")
        lines = [json.dumps({key: row[key] for key in keep}) + "\n" for row in splits[name]]
        atomic_write_text(paths.split(name), "".join(lines))
    return splits


def read_splits(paths: DemoPaths) -> dict[str, list[dict]]:
    return {name: [json.loads(line) for line in
                   paths.split(name).read_text(encoding="utf-8").splitlines()]
            for name in SPLITS}


# -- teachers --------------------------------------------------------------------------------
def teacher_tags(types: tuple[str, ...]) -> list[str]:
    """A teacher's head, in id order: O, then B- and I- of each of its types."""
    return ["O"] + [f"{prefix}-{entity_type}" for entity_type in types for prefix in "BI"]


def own_tags(tags: list[str], types: tuple[str, ...]) -> list[str]:
    """The sentence's BIO2 tags as a teacher of `types` learns them: other types become O
    (dropping whole entities keeps the rest valid BIO2)."""
    return [tag if tag[2:] in types else "O" for tag in tags]


def first_piece_labels(word_ids: list[int | None], tags: list[str],
                       label2id: dict[str, int]) -> list[int]:
    """The label of each sub-word: its word's tag on the word's first sub-word, IGNORED on
    later sub-words and special tokens (scoring reads a word at its first sub-word)."""
    labels, previous = [], None
    for word in word_ids:
        first = word is not None and word != previous
        labels.append(label2id[tags[word]] if first else IGNORED)
        previous = word
    return labels


def padded_batch(encoded, labels: list[list[int]], rows: torch.Tensor, pad_id: int,
                 device: torch.device) -> dict[str, torch.Tensor]:
    """The chosen sentences' sub-words, attention masks and labels, padded on the right."""
    width = max(len(encoded["input_ids"][row]) for row in rows.tolist())

    def padded(values: list[int], fill: int) -> list[int]:
        return values + [fill] * (width - len(values))

    chosen = rows.tolist()
    batch = {
        "input_ids": [padded(encoded["input_ids"][row], pad_id) for row in chosen],
        "attention_mask": [padded(encoded["attention_mask"][row], 0) for row in chosen],
        "labels": [padded(labels[row], IGNORED) for row in chosen],
    }
    return {name: torch.tensor(values, device=device) for name, values in batch.items()}


def train_teacher(paths: DemoPaths, name: str, types: tuple[str, ...], rows: list[dict],
                  recipe: NerRecipe, device: torch.device) -> None:
    """Fine-tune the base as a tagger of `types` on every teaching sentence; save it."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tags = teacher_tags(types)
    label2id = {tag: index for index, tag in enumerate(tags)}
    tokenizer = AutoTokenizer.from_pretrained(paths.base)
    torch.manual_seed(recipe.seed)
    model = AutoModelForTokenClassification.from_pretrained(
        paths.base, num_labels=len(tags), id2label=dict(enumerate(tags)),
        label2id=label2id).to(device)
    encoded = tokenizer([row["tokens"] for row in rows], is_split_into_words=True,
                        truncation=True, max_length=recipe.max_length)
    labels = [first_piece_labels(encoded.word_ids(index), own_tags(row["tags"], types), label2id)
              for index, row in enumerate(rows)]
    steps_per_epoch = math.ceil(len(rows) / recipe.batch_size)
    total = math.ceil(recipe.teacher_epochs * steps_per_epoch)
    steps = OptimizerSteps(model, device, learning_rate=recipe.teacher_learning_rate,
                           weight_decay=0.01, total_steps=total, warmup_ratio=0.1,
                           batch_size=recipe.batch_size)
    generator = torch.Generator().manual_seed(recipe.seed)
    model.train()
    with progress_bar(f"teacher {name}", total=total, unit="steps") as advance:
        for step in range(total):
            if step % steps_per_epoch == 0:
                order = torch.randperm(len(rows), generator=generator)
            chosen = order[(step % steps_per_epoch) * recipe.batch_size:][:recipe.batch_size]
            batch = padded_batch(encoded, labels, chosen, tokenizer.pad_token_id, device)

            def loss_of(piece: torch.Tensor, batch=batch) -> torch.Tensor:
                return model(**{key: values[piece] for key, values in batch.items()}).loss

            positions = torch.arange(len(chosen), device=device)
            loss = read_losses([(step + 1, steps.step(positions, loss_of))], "float32",
                               "the recipe's teacher_learning_rate")[0]
            advance(f"teacher {name} · loss {loss:.3f}", 1)
    with atomic_directory(paths.teacher(name)) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)


# -- the project -----------------------------------------------------------------------------
def write_project(paths: DemoPaths, recipe: NerRecipe) -> Path:
    """The NER demo's kiwb.toml: the taggers, the pool's words, the tagged eval and small
    settings (the text demo's writer, with the token kind's columns)."""
    return write_text_demo_project(
        paths, recipe, name="kiwb-demo-ner", teachers=TEACHERS,
        columns={"unlabeled": {"tokens_column": "tokens"},
                 "eval": {"tokens_column": "tokens", "tags_column": "tags"}})
