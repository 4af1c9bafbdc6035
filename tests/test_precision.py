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


@pytest.mark.slow
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


def _with_nan(source: Path, target: Path, parameter: str) -> Path:
    """A copy of a checkpoint with one weight set to NaN (what an fp16 overflow leaves)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(source)
    with torch.no_grad():
        model.get_parameter(parameter).view(-1)[0] = float("nan")
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return target


@pytest.mark.slow
def test_a_teacher_with_non_finite_logits_is_refused_and_nothing_is_stored(tmp_path, teachers_dir, data_dir):
    from cli_helpers import write_project

    broken = _with_nan(teachers_dir / "teacher_a", tmp_path / "broken", "classifier.bias")
    project = write_project(tmp_path / "proj", {"a": broken, "b": teachers_dir / "teacher_b"},
                            data_dir / "unlabeled.jsonl")
    failed = run_kiwb("score", project, cwd=tmp_path, check=False)
    message = " ".join(failed.stderr.split())
    assert failed.returncode == 2, failed.stderr
    assert ("teacher 'a' gave NaN or infinite logits on unlabeled texts 1-16 under dtype float32; "
            "nothing of that shard was stored") in message
    assert "check the checkpoint with kiwb predict" in message
    with Store(ProjectPaths(project).store) as store:
        assert not store.events_after(kind="score.shard")


@pytest.mark.slow
def test_a_non_finite_training_loss_stops_the_run_before_the_weights(scored_project, tmp_path, student_base):
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project, ignore=shutil.ignore_patterns("runs", "exports"))
    broken = _with_nan(student_base, tmp_path / "base", "bert.embeddings.LayerNorm.weight")
    failed = run_kiwb("train", project, "--run", "r", "--student", broken, cwd=tmp_path, check=False)
    message = " ".join(failed.stderr.split())
    assert failed.returncode != 0
    assert "the training loss became nan at step 1; stopped before any checkpoint took" in message
    assert "lower [training] learning_rate" in message
