"""What a training run's folder says, read without torch (the workbench reads it too).

A run folder holds immutable step checkpoints, each with a small progress.json: its step, its
own evaluation, and which step is the best so far. The best checkpoint is read from there, the
newest checkpoint naming it and its own folder holding its evaluation: it is stored once, so
nothing can disagree with it (a process killed between two writes leaves no stale copy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import TrainEval
from kiwb.project.store import Store
from kiwb.shell import command

PROGRESS_FILE = "progress.json"
MANIFEST_NAME = "kiwb-manifest.json"  # an export folder's: what its model was trained on


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def step_name(step: int) -> str:
    return f"step-{step:07d}"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Finished checkpoints of a run, oldest first (temp folders are ignored)."""
    folder = checkpoints_dir(run_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith("step-"))


def newest_run(root: Path) -> tuple[str, str]:
    """The run a command means when none is named (kiwb predict, evaluate, export): the one
    whose newest checkpoint was written last, with the line that says so (for stderr: the
    answers on stdout stay as they are); KiwbError naming the fix when no run has one."""
    runs = ProjectPaths(root).runs
    trained = sorted((checkpoints[-1].stat().st_mtime, folder.name)
                     for folder in (runs.iterdir() if runs.is_dir() else ())
                     if folder.is_dir() and (checkpoints := list_checkpoints(folder)))
    if not trained:
        raise KiwbError(f"{root}: no trained runs yet; run: {command('train', root)}")
    run = trained[-1][1]
    return run, f"Run {run}, the newest of {len(trained)} (--run NAME for another)"


def read_progress(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's small progress record: step, best so far and its own evaluation."""
    return json.loads((checkpoint / PROGRESS_FILE).read_text(encoding="utf-8"))


def read_best(run_dir: Path) -> dict[str, Any] | None:
    """The run's best checkpoint as {"checkpoint": folder name, "step", "metrics": its
    evaluation ({} without an eval set), "check": its learning check (None before any)}; None
    before any checkpoint names one. The folder named may be gone only if someone deleted it
    by hand: callers say so."""
    existing = list_checkpoints(run_dir)
    best = _progress_or_none(existing[-1]).get("best") if existing else None
    if not best:
        return None
    name = step_name(best["step"])
    own = _progress_or_none(checkpoints_dir(run_dir) / name)
    # the best checkpoint was the best when it was written: its own record is the one a
    # finished run settles (kiwb.workers.checkpoints.settle_check)
    check = (own.get("best") or best).get("check")
    return {"checkpoint": name, "step": best["step"], "metrics": own.get("evaluation") or {},
            "check": check}


def _progress_or_none(checkpoint: Path) -> dict[str, Any]:
    try:
        return read_progress(checkpoint)
    except (OSError, ValueError):
        return {}


def evaluation_of(project_root: Path, run: str, progress: dict) -> dict | None:
    """The figures of the checkpoint's own evaluation: its own record, or for a checkpoint
    saved before checkpoints kept one, the run's train.eval event at its step."""
    if progress.get("evaluation"):
        return progress["evaluation"]
    path = ProjectPaths(project_root).store
    if not path.is_file():
        return None
    with Store(path) as store:
        evaluations = [TrainEval.from_dict(event["data"])
                       for event in store.events_after(run=run, kind=TrainEval.kind)]
    at_step = [evaluation for evaluation in evaluations if evaluation.step == progress["step"]]
    if not at_step:
        return None
    return {key: value for key, value in at_step[-1].to_dict().items() if key != "step"}
