"""Building the demo project offline: corpus files, a tiny pre-trained base, the teachers.

The base plays the part of a published pre-trained encoder: a WordPiece tokenizer and a
tiny BERT trained here by masked-language modelling on every corpus text (labels unused).
Teachers are fine-tuned from it with `kiwb teach`'s own function, each on its own labels'
rows only, and students start from it. Every part is written atomically and reused when a
later run finds it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import string
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from kiwb.console import console, progress_bar
from kiwb.core.training_defaults import total_steps
from kiwb.demo.corpus import generate, split_by_label
from kiwb.demo.recipe import TEACHERS, DemoPaths, DemoRecipe
from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_directory, atomic_write_text
from kiwb.project.config import (
    CONFIG_NAME,
    DatasetConfig,
    ProjectConfig,
    ScoringConfig,
    TeacherConfig,
    TrainingConfig,
    load_config,
    render_config,
    write_new_project,
)
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.workers.data import TextTable
from kiwb.workers.student import collate, tokenize
from kiwb.workers.training_loop import OptimizerSteps, read_losses

MASK_SHARE = 0.15
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
BASE_ALPHABET = string.ascii_lowercase + string.digits + string.punctuation


def limit_cpu_threads(device: torch.device) -> None:
    """One CPU thread: the demo's tiny models gain nothing from intra-op threads, and on a
    busy machine competing threads thrash (measured 7x slower with 2 threads on 2 busy cores)."""
    if device.type == "cpu":
        torch.set_num_threads(1)
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # and the jobs the workbench starts


def build_demo(root: Path, recipe: DemoRecipe, device: torch.device) -> dict[str, float | None]:
    """Make (or finish) the demo project in `root`; the seconds each step took, None if reused."""
    return build_steps(root, recipe, device, write_corpus=write_corpus, read_splits=read_splits,
                       teachers=TEACHERS, train_teacher=train_teacher, write_project=write_project)


def build_steps(root: Path, recipe: DemoRecipe, device: torch.device, *, write_corpus: Callable,
                read_splits: Callable, teachers: dict, train_teacher: Callable,
                write_project: Callable, base_texts: Callable = lambda splits: splits,
                ) -> dict[str, float | None]:
    """Every demo's build, step by step, each skipped when its artifact is there: the corpus,
    the base pre-trained on `base_texts(splits)`, each of `teachers` (name: what it knows)
    taught on the teaching split, the project; the seconds each step took, None if reused.
    The kind's own steps are the functions passed."""
    paths = DemoPaths(root)
    marker = _claim_folder(paths, recipe)
    timings: dict[str, float | None] = {}
    splits = _step(timings, "corpus", paths.split("eval").is_file(),
                   lambda: write_corpus(paths, recipe)) or read_splits(paths)
    _step(timings, "base", paths.base.is_dir(),
          lambda: pretrain_base(base_texts(splits), recipe, paths.base, device))
    for name, knows in teachers.items():
        _step(timings, f"teacher {name}", paths.teacher(name).is_dir(),
              lambda name=name, knows=knows: train_teacher(paths, name, knows, splits["teach"],
                                                           recipe, device))
    if marker.get("status") != "ready":
        _step(timings, "project", False, lambda: write_project(paths, recipe))
        atomic_write_text(paths.marker, json.dumps({**marker, "status": "ready",
                                                    "timings": timings}, indent=2))
    return timings


def _step(timings: dict, step: str, done: bool, work: Callable):
    """Run `work` unless its artifact is already `done`; record its seconds (None: reused)."""
    if done:
        timings[step] = None
        return None
    started = time.perf_counter()
    result = work()
    timings[step] = time.perf_counter() - started
    return result


def _claim_folder(paths: DemoPaths, recipe: DemoRecipe) -> dict:
    """The folder's demo marker, written now for a new folder; refuse anyone else's folder."""
    root = paths.root
    if paths.marker.is_file():
        marker = json.loads(paths.marker.read_text(encoding="utf-8"))
        if marker.get("recipe") != recipe.key():
            raise KiwbError(f"{root} holds a demo built with other settings (recipe "
                            f"{marker.get('recipe')}); give kiwb demo another folder or delete it")
        return marker
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise KiwbError(f"{root} is not empty and holds no kiwb demo; give kiwb demo a new or "
                        "empty folder")
    marker = {"recipe": recipe.key(), "status": "building", "settings": dataclasses.asdict(recipe)}
    atomic_write_text(paths.marker, json.dumps(marker, indent=2))
    return marker


# -- corpus ----------------------------------------------------------------------------------
def write_corpus(paths: DemoPaths, recipe: DemoRecipe) -> dict[str, list[dict]]:
    """Generate the corpus and write its splits; the pool is written without labels."""
    per_label = sum(recipe.split_sizes.values())
    rows = generate(per_label, seed=recipe.seed, mixed_share=recipe.mixed_share)
    splits = split_by_label(rows, recipe.split_sizes, seed=recipe.seed)
    for name in ("teach", "pool", "eval"):  # eval last: its presence means all are written
        keep = ("text",) if name == "pool" else ("text", "label")
        lines = [json.dumps({key: row[key] for key in keep}) + "\n" for row in splits[name]]
        atomic_write_text(paths.split(name), "".join(lines))
    return splits


def read_splits(paths: DemoPaths) -> dict[str, list[dict]]:
    return {name: [json.loads(line) for line in paths.split(name).read_text(encoding="utf-8").splitlines()]
            for name in ("teach", "pool", "eval")}


# -- the base encoder ----------------------------------------------------------------------------
def build_tokenizer(texts: list[str], recipe: DemoRecipe):
    """A lower-casing BERT WordPiece tokenizer whose vocabulary is learnt from `texts`: every
    character (and its ## continuation), then whole words by frequency, ties alphabetical.

    Counting words here rather than running the `tokenizers` trainer keeps the demo
    reproducible: the trainer breaks ties between equal merges differently in every process.
    Words outside the vocabulary fall back to pieces, down to single characters.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts = Counter(word for text in texts
                     for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    alphabet = sorted(set(BASE_ALPHABET) | {char for word in counts for char in word})
    words = sorted((word for word in counts if len(word) > 1), key=lambda word: (-counts[word], word))
    tokens = [*SPECIAL_TOKENS, *alphabet, *(f"##{char}" for char in alphabet), *words]
    vocab = {token: index for index, token in enumerate(tokens[:recipe.vocab_size])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=recipe.max_length, unk_token="[UNK]",
        pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def pretrain_base(splits: dict[str, list[dict]], recipe: DemoRecipe, out: Path,
                  device: torch.device) -> None:
    """Train the tokenizer and a tiny BERT by masked-language modelling on every text; save both."""
    from transformers import BertConfig, BertForMaskedLM

    texts = [row["text"] for rows in splits.values() for row in rows]
    tokenizer = build_tokenizer(texts, recipe)
    torch.manual_seed(recipe.seed)
    model = BertForMaskedLM(BertConfig(
        vocab_size=len(tokenizer), hidden_size=recipe.hidden_size,
        num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads,
        intermediate_size=4 * recipe.hidden_size, max_position_embeddings=recipe.max_length,
        hidden_dropout_prob=recipe.dropout, attention_probs_dropout_prob=recipe.dropout,
        pad_token_id=tokenizer.pad_token_id,
    )).to(device)
    features = tokenize(tokenizer, texts, recipe.max_length)
    steps_per_epoch = math.ceil(len(texts) / recipe.mlm_batch_size)
    total = recipe.mlm_epochs * steps_per_epoch
    steps = OptimizerSteps(model, device, learning_rate=recipe.mlm_learning_rate,
                           weight_decay=0.01, total_steps=total, warmup_ratio=0.1,
                           batch_size=recipe.mlm_batch_size)
    generator = torch.Generator().manual_seed(recipe.seed)
    model.train()
    with progress_bar("pre-train base", total=total, unit="steps") as advance:
        for step in range(total):
            if step % steps_per_epoch == 0:
                order = torch.randperm(len(texts), generator=generator)
            rows = order[(step % steps_per_epoch) * recipe.mlm_batch_size:][:recipe.mlm_batch_size]
            batch = collate(tokenizer, features, rows, device)
            batch["input_ids"], labels = mask_tokens(batch["input_ids"], tokenizer, generator)
            batch["labels"] = labels.to(device)  # masked once per step, whatever pieces it takes

            def loss_of(piece: torch.Tensor, batch=batch) -> torch.Tensor:
                return model(**{name: values[piece] for name, values in batch.items()}).loss

            positions = torch.arange(len(rows), device=device)
            loss = read_losses([(step + 1, steps.step(positions, loss_of))], "float32",
                               "the recipe's mlm_learning_rate")[0]
            advance(f"pre-train base · MLM loss {loss:.3f}", 1)
    with atomic_directory(out) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)


def mask_tokens(input_ids: torch.Tensor, tokenizer, generator: torch.Generator):
    """BERT's masking: 15% of the real tokens are predicted; of those 80% become [MASK],
    10% a random token, 10% stay. Returns (masked ids, labels with -100 where not predicted)."""
    ids = input_ids.cpu().clone()
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
    chosen = (torch.rand(ids.shape, generator=generator) < MASK_SHARE) & ~special
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    draw = torch.rand(ids.shape, generator=generator)
    ids[chosen & (draw < 0.8)] = tokenizer.mask_token_id
    randomised = chosen & (draw >= 0.8) & (draw < 0.9)
    ids[randomised] = torch.randint(len(tokenizer), ids.shape, generator=generator)[randomised]
    return ids.to(input_ids.device), labels


# -- teachers and the project -------------------------------------------------------------------
def train_teacher(paths: DemoPaths, name: str, labels: tuple[str, ...], rows: list[dict],
                  recipe: DemoRecipe, device: torch.device) -> None:
    """Fine-tune the base on this teacher's labels with `kiwb teach`'s own function."""
    from kiwb.workers.teach import TeachSettings, subset_rows, teach

    texts = [row["text"] for row in rows]
    table = TextTable(str(paths.split("teach")), texts, [row["label"] for row in rows],
                      texts_fingerprint(texts))
    # The recipe sets the teachers' length by hand: exactly its epochs (min_steps 0), so the
    # demo's teachers, and its figures, stay what they were before teach took min_steps.
    settings = TeachSettings(epochs=recipe.teacher_epochs, min_steps=0,
                             learning_rate=recipe.teacher_learning_rate,
                             batch_size=recipe.batch_size, max_length=recipe.max_length,
                             seed=recipe.seed)
    count = len(subset_rows(table, list(labels))[0])
    total = total_steps(count, settings.batch_size, settings.epochs, settings.min_steps)
    with progress_bar(f"teacher {name}", total=total, unit="steps") as advance:
        teach(str(paths.base), list(labels), table, None, paths.teacher(name), settings, device,
              progress=lambda n, loss: advance(f"teacher {name} · loss {loss:.3f}", n))


def write_project(paths: DemoPaths, recipe: DemoRecipe, *, name: str = "kiwb-demo",
                  teachers=TEACHERS, columns: dict | None = None) -> Path:
    """The demo's kiwb.toml: the teachers, the pool, the labeled eval and small settings;
    `columns` names the data's columns ([data.ROLE] settings by role: the NER demo's words
    and tags)."""
    root = paths.root
    columns = columns or {"unlabeled": {}, "eval": {"label_column": "label"}}
    file = write_new_project(
        root, name=name, force=True,
        teachers=[TeacherConfig(name=teacher, path=paths.relative(paths.teacher(teacher)))
                  for teacher in teachers],
        unlabeled=DatasetConfig(path=paths.relative(paths.split("pool")), **columns["unlabeled"]),
        eval=DatasetConfig(path=paths.relative(paths.split("eval")), **columns["eval"]),
    )
    config = load_config(root)
    config = dataclasses.replace(
        config,
        scoring=dataclasses.replace(config.scoring, mc_passes=recipe.mc_passes,
                                    max_length=recipe.max_length, shard_size=512),
        training=dataclasses.replace(
            config.training, student=paths.relative(paths.base), batch_size=recipe.batch_size,
            eval_every=recipe.eval_every, max_length=recipe.max_length, seed=recipe.seed,
            **student_overrides(recipe)),
    )
    atomic_write_text(file, render_config(config))
    load_config(root)  # the loader's own checks on what was written
    return root / CONFIG_NAME


def student_overrides(recipe: DemoRecipe) -> dict:
    """The [training] settings a recipe sets itself; the rest keep kiwb's defaults."""
    chosen = {"epochs": recipe.student_epochs, "learning_rate": recipe.student_learning_rate,
              "min_steps": recipe.student_min_steps}
    return {key: value for key, value in chosen.items() if value is not None}


def write_kind_project(paths: DemoPaths, recipe: DemoRecipe, **sections) -> Path:
    """A demo kind's kiwb.toml: its own `sections` (name, teachers, data, and its kind's table:
    tasks, embedding) with the demo's small scoring and training settings, written and then
    read back through the loader's own checks."""
    root = paths.root
    config = ProjectConfig(
        root=root, file=root / CONFIG_NAME,
        scoring=ScoringConfig(mc_passes=recipe.mc_passes, max_length=recipe.max_length,
                              shard_size=512),
        training=TrainingConfig(student=paths.relative(paths.base), batch_size=recipe.batch_size,
                                eval_every=recipe.eval_every, max_length=recipe.max_length,
                                seed=recipe.seed, **student_overrides(recipe)),
        **sections)
    atomic_write_text(root / CONFIG_NAME, render_config(config))
    load_config(root)  # the loader's own checks on what was written
    return root / CONFIG_NAME


def say_built(timings: dict[str, float | None]) -> None:
    built = {step: seconds for step, seconds in timings.items() if seconds is not None}
    if built:
        console.print("Built " + ", ".join(f"{step} ({seconds:.1f}s)" for step, seconds in built.items()))
    reused = [step for step, seconds in timings.items() if seconds is None]
    if reused:
        console.print(f"Reused {', '.join(reused)} from an earlier run")
