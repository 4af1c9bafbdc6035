"""Checkpoints saved in half precision load, train and score in float32 (autocast alone
decides half precision), on CPU with tiny real checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_helpers import run_kiwb

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store


def _saved_in(source: Path, target: Path, dtype: torch.dtype) -> Path:
    """A copy of a checkpoint folder with its weights saved in `dtype`."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(source, dtype=dtype)
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    assert json.loads((target / "config.json").read_text())["dtype"] == str(dtype).removeprefix("torch.")
    return target


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_saved_checkpoints_load_in_float32(tmp_path, student_base, teachers_dir, dtype):
    from kiwb.workers.student import load_student_base
    from kiwb.workers.teachers import inspect_teacher, load_teacher

    base = _saved_in(student_base, tmp_path / "base", dtype)
    model, _ = load_student_base(str(base), ["a", "b", "c"])
    assert {p.dtype for p in model.parameters()} == {torch.float32}

    teacher_folder = _saved_in(teachers_dir / "teacher_a", tmp_path / "teacher", dtype)
    teacher, _ = load_teacher(inspect_teacher("a", str(teacher_folder)), "cpu")
    assert {p.dtype for p in teacher.parameters()} == {torch.float32}


def test_an_fp16_saved_student_base_trains_exports_and_predicts(scored_project, tmp_path, student_base):
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project, ignore=shutil.ignore_patterns("runs", "exports"))
    base = _saved_in(student_base, tmp_path / "base16", torch.float16)
    run_kiwb("train", project, "--run", "r", "--student", base, "--epochs", "2", cwd=tmp_path)
    with Store(ProjectPaths(project).store) as store:
        losses = [e["data"]["loss"] for e in store.events_after(run="r", kind="train.step")]
    assert losses and all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]
    run_kiwb("export", project, "--run", "r", "--to", tmp_path / "student", cwd=tmp_path)
    exported = json.loads((tmp_path / "student" / "config.json").read_text())
    assert exported["dtype"] == "float32"
    predicted = run_kiwb("predict", tmp_path / "student", "the striker scored a goal", cwd=tmp_path)
    assert predicted.stdout.split()[0] in ("sports", "politics", "music", "cooking")
