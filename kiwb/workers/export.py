"""`kiwb export`: a trained student as a plain Hugging Face model folder with a model card."""

from __future__ import annotations

import json
from pathlib import Path

from kiwb import __version__
from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_directory
from kiwb.project.paths import ProjectPaths
from kiwb.workers import checkpoints as ckpt

MANIFEST_NAME = "kiwb-manifest.json"


def choose_checkpoint(project_root: Path, run: str, checkpoint: str = "best") -> Path:
    """The checkpoint folder of a run: `best`, `last`, or a step number / folder name."""
    run_dir = ProjectPaths(project_root).run_dir(run)
    available = ckpt.list_checkpoints(run_dir)
    if not available:
        runs = sorted(p.name for p in ProjectPaths(project_root).runs.glob("*") if p.is_dir())
        raise KiwbError(f"run {run!r} has no checkpoints (runs here: {', '.join(runs) or 'none'}); "
                        f"train it first with: kiwb train {project_root} --run {run}")
    if checkpoint == "last":
        return available[-1]
    if checkpoint == "best":
        best = ckpt.read_best(run_dir)
        return run_dir / "checkpoints" / best["checkpoint"] if best else available[-1]
    name = ckpt.step_name(int(checkpoint)) if checkpoint.isdigit() else checkpoint
    chosen = run_dir / "checkpoints" / name
    if not chosen.is_dir():
        names = ", ".join(p.name for p in available)
        raise KiwbError(f"run {run!r} has no checkpoint {checkpoint!r} (it has: {names}, best, last)")
    return chosen


def export_student(project_root: Path, run: str, destination: Path, *, checkpoint: str = "best",
                   force: bool = False) -> Path:
    """Write the chosen checkpoint with save_pretrained, its tokenizer, a model card and manifest."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    source = choose_checkpoint(project_root, run, checkpoint)
    if destination.exists() and not force:
        raise KiwbError(f"{destination} already exists; choose another folder or add --force")
    run_dir = ProjectPaths(project_root).run_dir(run)
    manifest = ckpt.read_manifest(run_dir) or {}
    _, progress = ckpt.load_state(source)
    metrics = _metrics_of(run_dir, source)
    model = AutoModelForSequenceClassification.from_pretrained(source)
    tokenizer = AutoTokenizer.from_pretrained(source)
    export_manifest = {
        "kiwb_version": __version__, "run": run, "checkpoint": source.name, "step": progress["step"],
        "labels": [model.config.id2label[i] for i in range(model.config.num_labels)],
        "teachers": manifest.get("teachers"), "method": manifest.get("method"),
        "training": manifest.get("training"), "student_base": manifest.get("student"),
        "data": manifest.get("data"), "evaluation": metrics,
    }
    with atomic_directory(destination) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / MANIFEST_NAME).write_text(json.dumps(export_manifest, indent=2), encoding="utf-8")
        (staging / "README.md").write_text(model_card(export_manifest), encoding="utf-8")
    return destination


def _metrics_of(run_dir: Path, source: Path) -> dict | None:
    best = ckpt.read_best(run_dir)
    if best and best.get("checkpoint") == source.name and best.get("metrics"):
        return best["metrics"]
    return None


def model_card(manifest: dict) -> str:
    """A README.md for the exported model: labels, teachers, method, settings, figures."""
    method = manifest.get("method") or {}
    lines = [
        "---", "library_name: transformers", "pipeline_tag: text-classification", "tags:",
        "- kiwb", "- knowledge-integration", "---", "",
        f"# Student model from kiwb run `{manifest['run']}`", "",
        "A text classifier over the union of its teachers' label sets, trained without labels "
        "by [kiwb](https://pypi.org/project/kiwb/) (MUKI knowledge integration: Monte-Carlo-"
        "dropout uncertainty decides which teacher's prediction each text learns from).", "",
        "## Labels", "", ", ".join(f"`{label}`" for label in manifest["labels"]), "",
        "## Teachers", "", "| teacher | labels | content hash |", "|---|---|---|",
    ]
    for teacher in manifest.get("teachers") or []:
        lines.append(f"| {teacher['name']} | {', '.join(teacher['labels'])} | `{teacher['hash'][:16]}` |")
    lines += ["", "## Method and settings", "",
              f"- method: `{method.get('method')}`"
              + (f" (tau = {method.get('tau')})" if method.get("method") == "muki-soft" else ""),
              f"- MC dropout routing: {method.get('use_mc')}; margin re-weighting: {method.get('reweight')}",
              f"- student base: `{manifest.get('student_base')}`",
              f"- checkpoint: `{manifest['checkpoint']}` (step {manifest['step']})"]
    for key, value in (manifest.get("training") or {}).items():
        lines.append(f"- {key}: `{value}`")
    lines += ["", "## Evaluation", ""]
    metrics = manifest.get("evaluation")
    if metrics:
        lines += [f"- accuracy: {100 * metrics['accuracy']:.2f}%",
                  f"- macro-F1: {100 * metrics['macro_f1']:.2f}%",
                  f"- texts: {metrics.get('num_texts')}", "", "| label | accuracy |", "|---|---|"]
        for label, value in metrics["per_class_accuracy"].items():
            lines.append(f"| {label} | {'–' if value is None else f'{100 * value:.1f}%'} |")
    else:
        lines.append("No labeled evaluation set was configured for this run.")
    lines += ["", "## Use", "", "```python", "from transformers import pipeline", "",
              'classify = pipeline("text-classification", model="PATH/TO/THIS/FOLDER")',
              'print(classify("your text here"))', "```", ""]
    return "\n".join(lines)


