"""Student training, resume, export and predict, end to end on tiny real models."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch
from cli_helpers import run_kiwb, start_kiwb
from safetensors.torch import load_file

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers import checkpoints as ckpt


def _copy_project(source: Path, target: Path) -> Path:
    """A private copy of the shared scored project (scores included, runs excluded)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("runs", "exports"))
    return target


def _events(project: Path, run: str, kind: str) -> list[dict]:
    with Store(ProjectPaths(project).store) as store:
        return [event["data"] for event in store.events_after(run=run, kind=kind)]


def test_training_lowers_the_loss_and_beats_chance(scored_project, tmp_path):
    project = _copy_project(scored_project, tmp_path / "proj")
    result = run_kiwb("train", project, "--run", "hard", cwd=tmp_path)
    assert "Best eval accuracy" in result.stderr

    steps = _events(project, "hard", "train.step")
    assert steps[-1]["loss"] < steps[0]["loss"]
    evaluations = _events(project, "hard", "train.eval")
    assert [e["step"] for e in evaluations] == [20, 40, 60, 80]
    best = max(e["accuracy"] for e in evaluations)
    assert best > 0.5  # four balanced labels: chance is 0.25
    last = evaluations[-1]
    assert set(last["per_class_accuracy"]) == {"sports", "politics", "music", "cooking"}
    assert len(last["confusion"]) == 4 and sum(map(sum, last["confusion"])) == 40
    assert 0.0 <= last["macro_f1"] <= 1.0
    assert set(last["routing_accuracy"]) == {"mc_dropout", "plain_entropy"}

    run_dir = ProjectPaths(project).run_dir("hard")
    recorded_best = ckpt.read_best(run_dir)
    assert recorded_best["metrics"]["accuracy"] == best
    assert (run_dir / "checkpoints" / recorded_best["checkpoint"] / "model.safetensors").is_file()
    manifest = ckpt.read_manifest(run_dir)
    assert manifest["labels"] == ["sports", "politics", "music", "cooking"]
    assert [t["name"] for t in manifest["teachers"]] == ["a", "b"]
    assert len(manifest["teachers"][0]["hash"]) == 64


def _weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(checkpoint / "model.safetensors")


def test_killed_training_resumes_to_the_same_result(scored_project, tmp_path):
    straight = _copy_project(scored_project, tmp_path / "straight")
    killed = _copy_project(scored_project, tmp_path / "killed")
    for project in (straight, killed):  # long enough to be killed mid-way
        config = project / "kiwb.toml"
        config.write_text(config.read_text().replace("epochs = 8.0", "epochs = 12.0"))
    run_kiwb("train", straight, "--run", "r", cwd=tmp_path)

    worker = start_kiwb("train", killed, "--run", "r", cwd=tmp_path, log=tmp_path / "train.log")
    first = ProjectPaths(killed).run_dir("r") / "checkpoints" / ckpt.step_name(20)
    deadline = time.time() + 120
    while not first.exists() and time.time() < deadline and worker.poll() is None:
        time.sleep(0.01)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    left = ckpt.list_checkpoints(ProjectPaths(killed).run_dir("r"))
    assert left and int(left[-1].name.split("-")[1]) < 120, "the kill must land mid-way"

    refused = run_kiwb("train", killed, "--run", "r", cwd=tmp_path, check=False)
    assert refused.returncode != 0 and "--resume" in refused.stderr
    run_kiwb("train", killed, "--run", "r", "--resume", cwd=tmp_path)

    final = ckpt.step_name(120)
    expected = _weights(ProjectPaths(straight).run_dir("r") / "checkpoints" / final)
    resumed = _weights(ProjectPaths(killed).run_dir("r") / "checkpoints" / final)
    for name, tensor in expected.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=1e-5, atol=1e-6)
    straight_eval = _events(straight, "r", "train.eval")[-1]
    resumed_eval = _events(killed, "r", "train.eval")[-1]
    assert straight_eval["step"] == resumed_eval["step"] == 120
    assert straight_eval["accuracy"] == resumed_eval["accuracy"]
    assert straight_eval["confusion"] == resumed_eval["confusion"]


def test_export_round_trip_through_pipeline(scored_project, tmp_path):
    from transformers import AutoModelForSequenceClassification, pipeline

    project = _copy_project(scored_project, tmp_path / "proj")
    run_kiwb("train", project, "--run", "soft", "--method", "muki-soft", cwd=tmp_path)
    destination = tmp_path / "student"
    run_kiwb("export", project, "--run", "soft", "--to", destination, cwd=tmp_path)

    model = AutoModelForSequenceClassification.from_pretrained(destination)
    assert list(model.config.id2label.values()) == ["sports", "politics", "music", "cooking"]
    classify = pipeline("text-classification", model=str(destination))
    texts = ["guitar album concert band song", "election vote senate minister law"]
    labels = [p["label"] for p in classify(texts)]
    assert set(labels) <= {"sports", "politics", "music", "cooking"}
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(destination)
    with torch.no_grad():
        direct = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits.argmax(-1)
    assert labels == [model.config.id2label[int(i)] for i in direct]

    card = (destination / "README.md").read_text()
    assert "muki-soft" in card and "| cooking |" in card and "accuracy" in card
    manifest = json.loads((destination / "kiwb-manifest.json").read_text())
    assert manifest["labels"] == ["sports", "politics", "music", "cooking"]
    assert manifest["evaluation"]["per_class_accuracy"].keys() == {"sports", "politics", "music", "cooking"}

    predicted = run_kiwb("predict", destination, *texts, cwd=tmp_path).stdout.splitlines()
    assert [line.split()[0] for line in predicted] == labels
    from_project = run_kiwb("predict", project, "--run", "soft", texts[0], cwd=tmp_path).stdout
    assert from_project.split()[0] == labels[0]  # the best checkpoint is what was exported

    again = run_kiwb("export", project, "--run", "soft", "--to", destination, cwd=tmp_path, check=False)
    assert again.returncode != 0 and "--force" in again.stderr
    run_kiwb("export", project, "--run", "soft", "--to", destination, "--force", cwd=tmp_path)
    assert (destination / "model.safetensors").is_file()


@pytest.mark.parametrize("method", ["vanilla-kd", "uhc", "supervised"])
def test_every_method_trains_with_the_same_loop(scored_project, tmp_path, method):
    from kiwb.project.config import load_config
    from kiwb.workers.integrate import IntegrationSettings
    from kiwb.workers.train import Trainer, TrainRequest, prepare, with_training_overrides

    project = _copy_project(scored_project, tmp_path / "proj")
    config = with_training_overrides(load_config(project), epochs=6.0)
    request = TrainRequest(run=method, settings=IntegrationSettings.from_config(config, method=method))
    with Store(ProjectPaths(project).store) as store:
        trainer = Trainer(config, store, request, prepare(config, store, request), torch.device("cpu"))
        trainer.setup()
        result = trainer.run()
    assert result["step"] == trainer.total_steps == 60
    losses = [e["loss"] for e in _events(project, method, "train.step")]
    assert losses[-1] < losses[0]
    if method == "supervised":
        assert result["best"]["accuracy"] > 0.5


def test_resume_against_changed_teachers_is_refused(scored_project, tmp_path, teachers_dir):
    from transformers import AutoModelForSequenceClassification

    project = _copy_project(scored_project, tmp_path / "proj")
    run_kiwb("train", project, "--run", "r", "--epochs", "1", cwd=tmp_path)
    changed = tmp_path / "teacher_b"
    shutil.copytree(teachers_dir / "teacher_b", changed)
    model = AutoModelForSequenceClassification.from_pretrained(changed)
    with torch.no_grad():
        model.classifier.out_proj.bias += 1.0
    model.save_pretrained(changed)
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace(str(teachers_dir / "teacher_b"), str(changed)))
    run_kiwb("score", project, cwd=tmp_path)
    refused = run_kiwb("train", project, "--run", "r", "--epochs", "1", "--resume", cwd=tmp_path, check=False)
    assert refused.returncode == 2
    assert "teachers changed" in refused.stderr and "Traceback" not in refused.stderr


def test_training_before_scoring_says_which_command_to_run(tmp_path, teachers_dir, data_dir, student_base):
    from cli_helpers import write_project

    project = write_project(tmp_path / "p", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
                            data_dir / "unlabeled.jsonl", extra=f'[training]\nstudent = "{student_base}"\n')
    result = run_kiwb("train", project, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert f"kiwb score {project}" in result.stderr and "Traceback" not in result.stderr


def test_student_base_that_is_not_a_sequence_classifier_is_refused(scored_project, tmp_path):
    from transformers import ViTConfig

    vision = tmp_path / "vit"
    ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32).save_pretrained(vision)
    project = _copy_project(scored_project, tmp_path / "proj")
    result = run_kiwb("train", project, "--student", vision, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "cannot be a sequence classifier" in result.stderr and "Traceback" not in result.stderr


def test_teach_makes_a_teacher_on_a_label_subset(tmp_path, student_base):
    from tiny import make_texts, write_jsonl
    from transformers import AutoModelForSequenceClassification

    data = write_jsonl(tmp_path / "labeled.jsonl", make_texts(120, seed=31))
    out = tmp_path / "teacher"
    result = run_kiwb("teach", "--base", student_base, "--data", data, "--dev", data,
                      "--labels", "music,cooking", "--out", out, "--epochs", "4",
                      "--learning-rate", "0.006", "--batch-size", "16", cwd=tmp_path)
    assert "Best dev accuracy" in result.stderr
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "music", 1: "cooking"}
    again = run_kiwb("teach", "--base", student_base, "--data", data, "--labels", "music,cooking",
                     "--out", out, cwd=tmp_path, check=False)
    assert again.returncode == 2 and "--force" in again.stderr
    unknown = run_kiwb("teach", "--base", student_base, "--data", data, "--labels", "music,jazz",
                       "--out", tmp_path / "other", cwd=tmp_path, check=False)
    assert unknown.returncode == 2 and "jazz" in unknown.stderr and not (tmp_path / "other").exists()
