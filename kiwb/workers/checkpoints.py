"""Training checkpoints: immutable step folders written atomically, plus a run manifest.

A step folder, once written, is never written again: the state at a step is the same
however the run got there, so a second save of it (a stop right after an evaluation) is
skipped rather than replaced.

Weights are safetensors (via save_pretrained); optimizer, scheduler and RNG state are
plain tensors and containers loaded with `torch.load(weights_only=True)`, so nothing in a
project folder is ever unpickled as arbitrary objects.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_directory, atomic_write_text, recover_interrupted_writes

STATE_FILE = "trainer_state.pt"
PROGRESS_FILE = "progress.json"
MANIFEST_FILE = "manifest.json"
BEST_FILE = "best.json"


def checkpoints_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def step_name(step: int) -> str:
    return f"step-{step:07d}"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Finished checkpoints of a run, oldest first (temp folders are ignored)."""
    folder = checkpoints_dir(run_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith("step-"))


def recover_run(run_dir: Path) -> None:
    """Clear what a killed process left half-written in a run folder and its checkpoints."""
    recover_interrupted_writes(checkpoints_dir(run_dir))
    recover_interrupted_writes(run_dir)


def save_checkpoint(run_dir: Path, step: int, model, tokenizer, state: dict[str, Any],
                    progress: dict[str, Any]) -> Path:
    """Write a checkpoint folder for `step` atomically (unless it exists) and return it."""
    target = checkpoints_dir(run_dir) / step_name(step)
    if target.is_dir():
        return target
    with atomic_directory(target) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        torch.save(state, staging / STATE_FILE)
        (staging / PROGRESS_FILE).write_text(json.dumps(progress, indent=2), encoding="utf-8")
    return target


def load_state(checkpoint: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(trainer state, progress) of a checkpoint, loaded without unpickling objects."""
    state = torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=True)
    return state, read_progress(checkpoint)


def read_progress(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's small progress record: step, best so far and its own evaluation."""
    return json.loads((checkpoint / PROGRESS_FILE).read_text(encoding="utf-8"))


def settle_check(run_dir: Path, step: int, check: dict[str, Any]) -> None:
    """Give the kept checkpoint of `step` the learning check the finished run settled on (a
    check's cause can be told only once later evaluations are in): in its own evaluation, which
    an export's model card reads, and in best.json."""
    folder = checkpoints_dir(run_dir) / step_name(step)
    if (folder / PROGRESS_FILE).exists():
        progress = read_progress(folder)
        if progress.get("evaluation"):
            progress["evaluation"]["check"] = check
            atomic_write_text(folder / PROGRESS_FILE, json.dumps(progress, indent=2))
    best = read_best(run_dir)
    if best is not None and best.get("step") == step and best.get("metrics"):
        write_best(run_dir, step, {**best["metrics"], "check": check})


def prune_checkpoints(run_dir: Path, keep: set[str]) -> None:
    """Delete checkpoints except the newest and those named in `keep` (the best one)."""
    existing = list_checkpoints(run_dir)
    for checkpoint in existing[:-1]:
        if checkpoint.name not in keep:
            shutil.rmtree(checkpoint, ignore_errors=True)


def write_best(run_dir: Path, step: int, metrics: dict[str, Any]) -> None:
    atomic_write_text(run_dir / BEST_FILE, json.dumps({"checkpoint": step_name(step), "step": step,
                                                       "metrics": metrics}, indent=2))


def read_best(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / BEST_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def reconcile_best(run_dir: Path) -> None:
    """Make best.json name the best checkpoint that the newest one records.

    A process killed after saving a better checkpoint but before writing best.json leaves it
    naming the previous best, which the next prune would delete.
    """
    existing = list_checkpoints(run_dir)
    best = read_progress(existing[-1]).get("best") if existing else None
    if not best or (read_best(run_dir) or {}).get("step") == best["step"]:
        return
    folder = checkpoints_dir(run_dir) / step_name(best["step"])
    if folder.is_dir():
        write_best(run_dir, best["step"], read_progress(folder).get("evaluation") or {})


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(run_dir / MANIFEST_FILE, json.dumps(manifest, indent=2))


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / MANIFEST_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


# Manifest entries that must match for a run to be resumed, and how to explain a mismatch.
RESUME_CHECKS = {
    "teachers": "the teachers changed (names or content hashes)",
    "labels": "the union label set or its order changed",
    "method": "the integration method or its settings changed",
    "data": "the unlabeled data changed",
    "labeled_data": "the [data.labeled] texts or their labels changed",
    "given_labels": "the labels given to texts changed (kiwb labels list shows them)",
    "eval_data": "the labeled evaluation data was added, removed or changed",
    "student": "the student base changed",
    "training": "the training settings changed",
    "init_from_merge": "the merge run it started from changed (or it started from the base)",
    "embedding": "the [embedding] settings changed (pooling, direct_weight, coverage)",
}


def check_resumable(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Refuse to resume a run whose recorded inputs differ from the current ones."""
    recorded = read_manifest(run_dir)
    if recorded is None:
        raise KiwbError(f"{run_dir}: no manifest.json, so this run cannot be resumed; start it afresh")
    for key, reason in RESUME_CHECKS.items():
        if _comparable(key, recorded.get(key)) != _comparable(key, manifest.get(key)):
            raise KiwbError(
                f"cannot resume run {run_dir.name!r}: {reason} since it started"
                f"{_changed_settings(recorded.get(key), manifest.get(key))}; "
                f"start a new run with --run NEW_NAME (or delete {run_dir})"
            )


def _comparable(key: str, value: Any) -> Any:
    """The integration settings with the values of keys added since as a record written before
    them reads (`labels`: off), so an older run still resumes when nothing really changed."""
    if key == "method" and isinstance(value, dict):
        from kiwb.project.records import IntegrationSettings

        return IntegrationSettings.from_dict(value).to_dict()
    return value


def _changed_settings(before: Any, now: Any) -> str:
    """` (name: old -> new, ...)` for settings dicts, so a user can put them back; a default
    added by a later kiwb shows as unset before."""
    if not isinstance(before, dict) or not isinstance(now, dict):
        return ""
    changed = [f"{name}: {before.get(name, 'unset')!r} -> {now.get(name, 'unset')!r}"
               for name in sorted(set(before) | set(now)) if before.get(name) != now.get(name)]
    return f" ({', '.join(changed)})" if changed else ""
