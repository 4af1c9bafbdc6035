"""Building the embedding demo project offline: the text demo's corpus and tiny pre-trained
base, its two teachers of half the topics each kept as sentence encoders (the head dropped,
mean pooling, sentence-transformers' files beside them), and the embedding project. Every part
is written atomically and reused when a later run finds it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from kiwb.demo import build as text_demo
from kiwb.demo.build import build_steps
from kiwb.demo.embedding_recipe import TEACHERS, EmbeddingRecipe
from kiwb.demo.recipe import DemoPaths
from kiwb.project.atomic import atomic_directory
from kiwb.project.config import (
    DataConfig,
    DatasetConfig,
    EmbeddingConfig,
    TeacherConfig,
)


def build_embedding_demo(root: Path, recipe: EmbeddingRecipe,
                         device: torch.device) -> dict[str, float | None]:
    """Make (or finish) the embedding demo project in `root`; the seconds each step took,
    None if reused."""
    return build_steps(root, recipe, device, write_corpus=text_demo.write_corpus,
                       read_splits=text_demo.read_splits, teachers=TEACHERS,
                       train_teacher=train_encoder, write_project=write_project)


@dataclass(frozen=True)
class _ClassifierPaths(DemoPaths):
    """Where a teacher is taught as a classifier, before its encoder is kept."""

    def teacher(self, name: str) -> Path:
        return self.root / "models" / f"classifier-{name}"


def train_encoder(paths: DemoPaths, name: str, labels: tuple[str, ...], rows: list[dict],
                  recipe: EmbeddingRecipe, device: torch.device) -> None:
    """The text demo's teacher of `labels`, then its encoder alone as a sentence encoder."""
    from transformers import AutoModel, AutoTokenizer

    from kiwb.kinds.embedding.export import write_sentence_transformers_files

    taught = _ClassifierPaths(paths.root)
    if not taught.teacher(name).is_dir():
        text_demo.train_teacher(taught, name, labels, rows, recipe, device)
    encoder = AutoModel.from_pretrained(taught.teacher(name))
    tokenizer = AutoTokenizer.from_pretrained(taught.teacher(name))
    with atomic_directory(paths.teacher(name)) as staging:
        encoder.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        write_sentence_transformers_files(staging, "mean", int(encoder.config.hidden_size),
                                          recipe.max_length)
    shutil.rmtree(taught.teacher(name))


def write_project(paths: DemoPaths, recipe: EmbeddingRecipe) -> Path:
    """The embedding demo's kiwb.toml: [embedding], the two encoders, the pool, the eval set
    with its topics (the kNN probe) and the text demo's small settings."""
    return text_demo.write_kind_project(
        paths, recipe, name="kiwb-demo-embedding", embedding=EmbeddingConfig(),
        teachers=tuple(TeacherConfig(name=name, path=paths.relative(paths.teacher(name)))
                       for name in TEACHERS),
        data=DataConfig(unlabeled=DatasetConfig(path=paths.relative(paths.split("pool"))),
                        eval=DatasetConfig(path=paths.relative(paths.split("eval")),
                                           label_column="label")))
