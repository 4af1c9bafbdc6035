"""Building the multi-task demo project offline: texts of one topic, some mentioning a second
(`topic`: the main one; `tags`: every topic mentioned), the tiny pre-trained base
(kiwb.demo.build's), the text demo's two topic teachers and a tagger of all eight topics, and
the multi-task project. Every part is written atomically and reused when a later run finds it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from kiwb.demo import build as text_demo
from kiwb.demo import multilabel_build
from kiwb.demo.build import build_steps
from kiwb.demo.corpus import generate, split_by_label
from kiwb.demo.multitask_recipe import TASKS, TEACHERS, MultiTaskRecipe
from kiwb.demo.recipe import DemoPaths
from kiwb.project.atomic import atomic_write_text
from kiwb.project.config import (
    DataConfig,
    DatasetConfig,
    TaskConfig,
    TeacherConfig,
)

SPLITS = ("teach", "pool", "eval")  # eval last: its presence means all are written


def build_multitask_demo(root: Path, recipe: MultiTaskRecipe,
                         device: torch.device) -> dict[str, float | None]:
    """Make (or finish) the multi-task demo project in `root`; the seconds each step took,
    None if reused."""
    return build_steps(root, recipe, device, write_corpus=write_corpus, read_splits=read_splits,
                       teachers=TEACHERS, train_teacher=train_teacher, write_project=write_project)


def mention(rows: list[dict], recipe: MultiTaskRecipe, rng: random.Random) -> list[dict]:
    """{"text", "topic", "tags"} rows: each text of one topic, a `mention_share` of them ending
    with the first words of a text of another topic (its second tag)."""
    found = []
    for row in rows:
        tags = [row["label"]]
        text = row["text"]
        others = [other for other in rows if other["label"] != row["label"]]
        if others and rng.random() < recipe.mention_share:
            other = rng.choice(others)
            text = f"{text} {' '.join(other['text'].split()[:recipe.mention_words])}"
            tags.append(other["label"])
        found.append({"text": text, "topic": row["label"], "tags": sorted(tags)})
    return found


def write_corpus(paths: DemoPaths, recipe: MultiTaskRecipe) -> dict[str, list[dict]]:
    """Generate the texts, split them by topic, add the mentions; the pool without labels."""
    rows = generate(sum(recipe.split_sizes.values()), seed=recipe.seed,
                    mixed_share=recipe.mixed_share)
    parts = split_by_label(rows, recipe.split_sizes, seed=recipe.seed)
    rng = random.Random(recipe.seed)
    splits = {name: mention(parts[name], recipe, rng) for name in SPLITS}
    for name in SPLITS:
        keep = ("text",) if name == "pool" else ("text", "topic", "tags")
        lines = [json.dumps({key: row[key] for key in keep}) + "\n" for row in splits[name]]
        atomic_write_text(paths.split(name), "".join(lines))
    return splits


def read_splits(paths: DemoPaths) -> dict[str, list[dict]]:
    return {name: [json.loads(line) for line in
                   paths.split(name).read_text(encoding="utf-8").splitlines()]
            for name in SPLITS}


def train_teacher(paths: DemoPaths, name: str, knows: tuple, rows: list[dict],
                  recipe: MultiTaskRecipe, device: torch.device) -> None:
    """A topic teacher as the text demo teaches one (on its topics' texts), the tagger as the
    multi-label demo does (a sigmoid per topic, on every teaching text)."""
    task, labels = knows
    if TASKS[task] == "single-label":
        text_demo.train_teacher(paths, name, labels,
                                [{"text": row["text"], "label": row["topic"]} for row in rows],
                                recipe, device)
    else:
        multilabel_build.train_teacher(
            paths, name, labels, [{"text": row["text"], "labels": row["tags"]} for row in rows],
            recipe, device)


def write_project(paths: DemoPaths, recipe: MultiTaskRecipe) -> Path:
    """The multi-task demo's kiwb.toml: the tasks, each teacher with its task, the pool, the
    labeled eval (a column per task) and the text demo's small settings."""
    return text_demo.write_kind_project(
        paths, recipe, name="kiwb-demo-multitask",
        tasks=tuple(TaskConfig(name=task, kind=kind) for task, kind in TASKS.items()),
        teachers=tuple(TeacherConfig(name=name, path=paths.relative(paths.teacher(name)),
                                     tasks=(task,)) for name, (task, _) in TEACHERS.items()),
        data=DataConfig(unlabeled=DatasetConfig(path=paths.relative(paths.split("pool"))),
                        eval=DatasetConfig(path=paths.relative(paths.split("eval")))))
