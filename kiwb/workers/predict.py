"""`kiwb predict`: a quick look at what a trained or exported student says."""

from __future__ import annotations

from pathlib import Path

import torch
from rich.markup import escape

from kiwb.console import one_line
from kiwb.errors import KiwbError
from kiwb.shell import command
from kiwb.workers.runtime import load_classifier


def resolve_model_folder(target: Path, run: str | None) -> Path:
    """An exported or checkpoint folder as is; a project folder becomes its run's best checkpoint."""
    if (target / "config.json").is_file():
        return target
    if (target / "kiwb.toml").is_file():
        from kiwb.project.paths import ProjectPaths
        from kiwb.workers.export import choose_checkpoint

        if run is None:
            runs = sorted((p for p in ProjectPaths(target).runs.glob("*") if p.is_dir()),
                          key=lambda p: p.stat().st_mtime)
            if not runs:
                raise KiwbError(f"{target}: no trained runs yet; run: {command('train', target)}")
            run = runs[-1].name
            from kiwb.console import console  # stderr: the answers on stdout stay as they are

            console.print(f"Run {run}, the newest of {len(runs)} (--run NAME for another)",
                          highlight=False, markup=False, soft_wrap=True)
        return choose_checkpoint(target, run)
    raise KiwbError(f"{target}: neither a model folder (config.json) nor a kiwb project (kiwb.toml)")


@torch.no_grad()
def predict_texts(folder: Path, texts: list[str], top: int = 3) -> list[list[tuple[str, float]]]:
    """The `top` most probable labels of each text, most probable first."""
    from transformers import AutoTokenizer

    model = load_trained_head(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    probs = model(**batch).logits.softmax(-1)
    values, indices = probs.topk(min(top, probs.shape[-1]), dim=-1)
    return [
        [(model.config.id2label[int(i)], float(v)) for v, i in zip(row_v, row_i, strict=True)]
        for row_v, row_i in zip(values, indices, strict=True)
    ]


def load_trained_head(folder: Path):
    """The classifier in `folder`, refused in one line when its head is not in the folder: a
    base encoder loads with a random head, which would answer at random (LABEL_0 ...)."""
    model, info = load_classifier(folder, output_loading_info=True)
    missing = list(info.get("missing_keys") or [])
    if missing:
        raise KiwbError(f"{folder}: has no trained classifier head ({', '.join(missing[:3])} "
                        "missing), so it would answer at random; give a kiwb export, a run's "
                        "checkpoint or a fine-tuned classifier")
    return model.eval()


def folder_kind(folder: Path) -> str:
    """The kind of a model folder, from its config.json (kiwb.kinds)."""
    import json

    from kiwb.kinds import DEFAULT_KIND, kind_of_checkpoint

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    found = kind_of_checkpoint(config)
    return found[0].name if found is not None else DEFAULT_KIND


def predicted_labels(folder: Path, texts: list[str], top: int = 3) -> list[str]:
    """The sequence kind's prediction seam: per text, its top label, the `top` labels with
    their probabilities, and the text's start (Rich markup)."""
    lines = []
    for text, ranked in zip(texts, predict_texts(folder, texts, top=top), strict=True):
        shown = "  ".join(f"{label} {100 * prob:.1f}%" for label, prob in ranked)
        lines.append(f"[bold]{escape(ranked[0][0])}[/bold]\t{escape(shown)}\t{escape(one_line(text)[:60])}")
    return lines
