"""Training checkpoints: immutable step folders written atomically, plus a run manifest.

A step folder, once written, is never written again: the state at a step is the same
however the run got there, so a second save of it (a stop right after an evaluation) is
skipped rather than replaced.

Weights are safetensors (via save_pretrained); optimizer, scheduler and RNG state are
plain tensors and containers loaded with `torch.load(weights_only=True)`, so nothing in a
project folder is ever unpickled as arbitrary objects.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import torch

from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_directory, atomic_write_text, recover_interrupted_writes
from kiwb.project.resume_checks import (  # noqa: F401 (its callers read them here)
    MANIFEST_FILE,
    check_resumable,
    read_manifest,
)
from kiwb.project.run_folder import (  # noqa: F401  (the run folder's reading, for the workers)
    PROGRESS_FILE,
    checkpoints_dir,
    list_checkpoints,
    read_best,
    read_progress,
    step_name,
)

STATE_FILE = "trainer_state.pt"


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
        write_checksums(staging)
    return target


# What a checkpoint holds, file by file (size and SHA-256), written last into it: a file cut
# short or changed later is named when the checkpoint is read. progress.json is left out: the
# run's learning check is written into it once the run ends (settle_check).
CHECKSUMS_FILE = "checksums.json"


def write_checksums(folder: Path) -> None:
    found = {path.name: _file_check(path) for path in sorted(folder.iterdir())
             if path.is_file() and path.name not in (PROGRESS_FILE, CHECKSUMS_FILE)}
    (folder / CHECKSUMS_FILE).write_text(json.dumps(found, indent=2), encoding="utf-8")


def _file_check(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def checkpoint_problem(folder: Path, skip: tuple[str, ...] = ()) -> str | None:
    """Why a checkpoint is not what was written (a file missing, cut short or changed), or
    None; a checkpoint written before kiwb kept checksums is taken as it is. `skip`: files
    the reader does not read."""
    listed = folder / CHECKSUMS_FILE
    if not listed.is_file():
        return None
    for name, expected in json.loads(listed.read_text(encoding="utf-8")).items():
        if name in skip:
            continue
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected["bytes"]:
            return f"{name} has {path.stat().st_size:,} bytes where {expected['bytes']:,} were written"
        if _file_check(path)["sha256"] != expected["sha256"]:
            return f"{name} is not what was written"
    return None


def set_aside(checkpoint: Path) -> Path:
    """Rename a damaged checkpoint so that no reader takes it for one (kept to look at)."""
    target = checkpoint.with_name(f"damaged-{checkpoint.name}")
    number = 1
    while target.exists():
        number += 1
        target = checkpoint.with_name(f"damaged-{checkpoint.name}-{number}")
    checkpoint.rename(target)
    return target


def check_checkpoint(folder: Path) -> None:
    """KiwbError in one line when the model a checkpoint holds is damaged, naming it and the
    file. The trainer's state (optimizer, scheduler) is left to a resume, the one reader of it:
    an export, an evaluation or a prediction reads the model alone."""
    problem = checkpoint_problem(folder, skip=(STATE_FILE,))
    if problem:
        raise KiwbError(f"{folder}: this checkpoint is damaged ({problem}); use another "
                        "(--checkpoint STEP, kiwb runs lists them)")


def load_state(checkpoint: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(trainer state, progress) of a checkpoint, loaded without unpickling objects."""
    state = torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=True)
    return state, read_progress(checkpoint)


def settle_check(run_dir: Path, step: int, check: dict[str, Any]) -> None:
    """Give the kept checkpoint of `step` the learning check the finished run settled on (a
    check's cause can be told only once later evaluations are in): in its own record of the
    best and in its evaluation, which an export's model card reads. The one write to a
    checkpoint once written: it changes what is said of the state, not the state."""
    folder = checkpoints_dir(run_dir) / step_name(step)
    if (folder / PROGRESS_FILE).exists():
        progress = read_progress(folder)
        if progress.get("evaluation"):
            progress["evaluation"]["check"] = check
        if (progress.get("best") or {}).get("step") == step:
            progress["best"]["check"] = check
        atomic_write_text(folder / PROGRESS_FILE, json.dumps(progress, indent=2))


def prune_checkpoints(run_dir: Path, keep: set[str]) -> None:
    """Delete checkpoints except the newest and those named in `keep` (the best one)."""
    existing = list_checkpoints(run_dir)
    for checkpoint in existing[:-1]:
        if checkpoint.name not in keep:
            shutil.rmtree(checkpoint, ignore_errors=True)


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(run_dir / MANIFEST_FILE, json.dumps(manifest, indent=2))

