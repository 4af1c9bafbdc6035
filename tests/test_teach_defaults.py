"""`kiwb teach` takes the student's training defaults (one rule, not a copy), balances classes
on request, and says what to try when a teacher is still flagged."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from cli_helpers import run_kiwb

from kiwb.core.training_defaults import AUTO, DEFAULT_EPOCHS, DEFAULT_MIN_STEPS, auto_learning_rate
from kiwb.project.config_schema import TrainingConfig
from kiwb.project.job_specs import TeachSpec
from kiwb.workers.runtime import resolve_device
from kiwb.workers.teach import TeachSettings, balanced_class_weights, teacher_hint


def test_teach_and_the_student_share_one_rule_for_length_and_learning_rate():
    student = TrainingConfig()
    teacher = TeachSettings()
    spec = {field.name: field.default for field in dataclasses.fields(TeachSpec)}
    assert (teacher.epochs, teacher.min_steps, teacher.learning_rate) == (
        student.epochs, student.min_steps, student.learning_rate) == (
        DEFAULT_EPOCHS, DEFAULT_MIN_STEPS, AUTO)
    assert (spec["epochs"], spec["min_steps"], spec["learning_rate"]) == (
        DEFAULT_EPOCHS, DEFAULT_MIN_STEPS, AUTO)
    assert teacher.balance == spec["balance"] == "none"


@pytest.mark.parametrize(("targets", "classes", "weights"), [
    # n / (C n_c): 4 / (2 x 3) and 4 / (2 x 1)
    ([0, 0, 0, 1], 2, [2 / 3, 2.0]),
    # every class alike: weight 1 each
    ([0, 1, 2, 0, 1, 2], 3, [1.0, 1.0, 1.0]),
    # a class without texts weighs nothing: 4 / (3 x 2) for the other two
    ([0, 0, 1, 1], 3, [2 / 3, 2 / 3, 0.0]),
])
def test_balanced_class_weights(targets, classes, weights):
    found = balanced_class_weights(torch.tensor(targets), classes)
    assert found.tolist() == pytest.approx(weights)


def test_the_hint_offers_balancing_only_when_it_was_not_used():
    assert teacher_hint(TeachSettings()).endswith("or balance its classes (--balance sampler)")
    assert "--balance" not in teacher_hint(TeachSettings(balance="sampler"))
    assert "--min-steps" in teacher_hint(TeachSettings(balance="loss"))


@pytest.mark.slow
def test_teach_with_its_defaults_takes_the_minimum_steps_at_the_auto_rate(tmp_path, student_base):
    from tiny import make_texts, write_jsonl

    # 60 texts of two labels: 3 epochs of batch 32 would be 6 steps; the minimum makes it 300
    data = write_jsonl(tmp_path / "labeled.jsonl", make_texts(120, seed=31))
    out = tmp_path / "teacher"
    taught = run_kiwb("teach", "--base", student_base, "--data", data, "--dev", data,
                      "--labels", "music,cooking", "--out", out, cwd=tmp_path)
    said = " ".join(taught.stderr.split())
    config = json.loads((student_base / "config.json").read_text())
    rate = auto_learning_rate(config["hidden_size"])
    device = resolve_device("auto").type  # cpu here, cuda on a GPU box
    assert f"from 60 texts on {device}: {DEFAULT_MIN_STEPS} steps" in said
    assert "balanced" not in said
    assert f"Learning rate {rate:.2e} (auto for the base's width)" in said
    report = json.loads((out / "kiwb-teach.json").read_text())
    assert report["dev"]["step"] <= DEFAULT_MIN_STEPS and report["check"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("balance", ["sampler", "loss"])
def test_teach_balances_classes_on_request(tmp_path, student_base, balance):
    from tiny import make_texts, write_jsonl

    rows = make_texts(160, seed=31)  # cooking made rare: a tenth of music's texts
    cooking = [row for row in rows if row["label"] == "cooking"]
    rows = [row for row in rows if row["label"] != "cooking"] + cooking[:4]
    data = write_jsonl(tmp_path / "labeled.jsonl", rows)
    out = tmp_path / "teacher"
    taught = run_kiwb("teach", "--base", student_base, "--data", data, "--labels",
                      "music,cooking", "--out", out, "--balance", balance, "--min-steps", "20",
                      "--learning-rate", "0.006", "--batch-size", "16", cwd=tmp_path)
    assert f"classes balanced by {balance}" in " ".join(taught.stderr.split())
    assert (out / "config.json").is_file()


def test_a_negative_minimum_is_refused_in_one_line(tmp_path):
    refused = run_kiwb("teach", "--base", tmp_path / "base", "--data", tmp_path / "data.jsonl",
                       "--labels", "a,b", "--out", tmp_path / "out", "--min-steps", "-3",
                       cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "kiwb: error: --min-steps -3: give 0 (teach exactly --epochs) or a positive number of steps"]
    assert not (tmp_path / "out").exists()
