"""`kiwb teach`: fine-tune a teacher on a chosen subset of labels (the paper's way to get
teachers with disjoint specialities), writing a normal Hugging Face checkpoint."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kiwb.core.learning_check import TEACHER_HINT, check_of, check_on_eval
from kiwb.core.training_defaults import (
    AUTO,
    DEFAULT_EPOCHS,
    DEFAULT_MIN_STEPS,
    resolve_learning_rate,
    total_steps,
)
from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_directory
from kiwb.project.teach_report import REPORT_FILE, report_payload
from kiwb.workers.data import TextTable
from kiwb.workers.student import collate, evaluate, load_student_base, tokenize
from kiwb.workers.training_loop import OptimizerSteps, read_losses

# How the classes are balanced while teaching: not at all, by weighting the loss, or by
# sampling the texts (BENCHMARKS.md "Teaching rare classes" measured them).
BALANCES = ("none", "loss", "sampler")


@dataclass(frozen=True)
class TeachSettings:
    """How a teacher is fine-tuned (cross-entropy on its own labels). The length and learning
    rate follow the student's [training] defaults (kiwb.core.training_defaults)."""

    epochs: float = DEFAULT_EPOCHS
    min_steps: int = DEFAULT_MIN_STEPS
    learning_rate: float | str = AUTO
    balance: str = "none"
    batch_size: int = 32
    max_length: int = 128
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0


def subset_rows(table: TextTable, labels: list[str]) -> tuple[list[str], torch.Tensor]:
    """Texts whose gold label is in `labels`, and those labels as ids into `labels`."""
    if table.labels is None:
        raise KiwbError(f"{table.source}: teaching needs a label column; pass --label-column")
    present = set(table.labels)
    missing = [label for label in labels if label not in present]
    if missing:
        raise KiwbError(f"{table.source}: no rows with label(s) {', '.join(missing)} "
                        f"(labels present: {', '.join(sorted(present)[:12])}...)")
    index = {label: i for i, label in enumerate(labels)}
    keep = [i for i, label in enumerate(table.labels) if label in index]
    return [table.texts[i] for i in keep], torch.tensor([index[table.labels[i]] for i in keep])


def teach(base: str, labels: list[str], train: TextTable, dev: TextTable | None, out: Path,
          settings: TeachSettings, device: torch.device,
          progress: Callable[[int, float], None] | None = None) -> dict:
    """Fine-tune `base` on the rows of `labels`; keep the best epoch on dev; save to `out`."""
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise KiwbError(f"--labels {','.join(labels)}: give two or more distinct label names")
    texts, targets = subset_rows(train, labels)
    torch.manual_seed(settings.seed)
    model, tokenizer = load_student_base(base, labels)
    model.to(device)
    features = tokenize(tokenizer, texts, settings.max_length)
    dev_data = None
    if dev is not None:
        dev_texts, dev_ids = subset_rows(dev, labels)
        dev_data = (tokenize(tokenizer, dev_texts, settings.max_length), dev_ids)
    steps_per_epoch = math.ceil(len(texts) / settings.batch_size)
    total = total_steps(len(texts), settings.batch_size, settings.epochs, settings.min_steps)
    learning_rate, _ = resolve_learning_rate(settings.learning_rate, model.config)
    steps = OptimizerSteps(model, device, learning_rate=learning_rate,
                           weight_decay=settings.weight_decay, total_steps=total,
                           warmup_ratio=settings.warmup_ratio, batch_size=settings.batch_size)
    class_weights = (balanced_class_weights(targets, len(labels)).to(device)
                     if settings.balance == "loss" else None)

    def loss_of(rows: torch.Tensor) -> torch.Tensor:
        logits = model(**collate(tokenizer, features, rows, device)).logits
        return torch.nn.functional.cross_entropy(logits.float(), targets[rows].to(device),
                                                 weight=class_weights)

    best: dict | None = None
    generator = torch.Generator().manual_seed(settings.seed)
    text_weights = (balanced_class_weights(targets, len(labels))[targets]
                    if settings.balance == "sampler" else None)
    model.train()
    for step in range(total):
        if step % steps_per_epoch == 0:
            order = (torch.multinomial(text_weights, len(texts), replacement=True,
                                       generator=generator)
                     if text_weights is not None else torch.randperm(len(texts), generator=generator))
        rows = order[(step % steps_per_epoch) * settings.batch_size:][:settings.batch_size]
        loss = read_losses([(step + 1, steps.step(rows, loss_of))], "float32", "--learning-rate")
        if progress is not None:
            progress(1, loss[0])
        end_of_epoch = (step + 1) % steps_per_epoch == 0 or step + 1 == total
        if end_of_epoch:
            report = None
            if dev_data is None:
                metrics = {"accuracy": None}
            else:  # the dev figures, and the learning check, travel with the checkpoint
                metrics = evaluate(model, tokenizer, *dev_data, labels, settings.batch_size, device)
                check = check_on_eval(labels, metrics["confusion"], hint=teacher_hint(settings))
                metrics["check"] = check.to_dict()
                report = report_payload(labels, {"step": step + 1, **metrics}, check)
            if best is None or dev_data is None or _rank(metrics) > _rank(best):
                best = {"step": step + 1, "learning_rate": learning_rate, **metrics}
                _save(model, tokenizer, out, report)
            model.train()
    return best or {}


def balanced_class_weights(targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """(C,) weights n / (C n_c): every class weighs as much in all as the others (a class
    with no text gets 0)."""
    counts = torch.bincount(targets, minlength=num_classes).double()
    weights = torch.where(counts > 0, len(targets) / (num_classes * counts.clamp(min=1)), 0.0)
    return weights.float()


def teacher_hint(settings: TeachSettings) -> str:
    """What to try on a teacher the learning check flags, given how it was taught."""
    if settings.balance == "none":
        return TEACHER_HINT + ", or balance its classes (--balance sampler)"
    return TEACHER_HINT


def _rank(metrics: dict) -> tuple[bool, float]:
    """Epochs compared on dev: one without collapsed labels first, then by accuracy."""
    return check_of(metrics).learned, metrics["accuracy"]


def _save(model, tokenizer, out: Path, report: dict | None) -> None:
    with atomic_directory(out) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        if report is not None:
            (staging / REPORT_FILE).write_text(json.dumps(report, indent=2), encoding="utf-8")
