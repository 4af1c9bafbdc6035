"""Student training, resume, export and predict, end to end on tiny real models."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch
from cli_helpers import run_kiwb, start_kiwb
from safetensors.torch import load_file

from kiwb.errors import KiwbError
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers import checkpoints as ckpt

LABELS = ["sports", "politics", "music", "cooking"]


def _copy_project(source: Path, target: Path) -> Path:
    """A private copy of the shared scored project (scores included, runs excluded)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("runs", "exports"))
    return target


def _events(project: Path, run: str, kind: str) -> list[dict]:
    with Store(ProjectPaths(project).store) as store:
        return [event["data"] for event in store.events_after(run=run, kind=kind)]


def _trainer(store: Store, project: Path, run: str, method: str = "muki-hard", resume: bool = False,
             ablation: dict | None = None, **overrides):
    """A set-up Trainer of `run` in this process, writing to `store`."""
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.teacher_kinds import load_project
    from kiwb.workers.train import Trainer, prepare, with_training_overrides
    from kiwb.workers.training_data import TrainRequest

    loaded = load_project(project)
    config = with_training_overrides(loaded.config, **overrides)
    integration = IntegrationSettings.from_project(loaded, method=method, **(ablation or {}))
    request = TrainRequest(run=run, settings=integration, resume=resume)
    trainer = Trainer(config, store, request, prepare(config, store, request, loaded.kind),
                      torch.device("cpu"))
    trainer.setup()
    return trainer


def _store(project: Path) -> Store:
    return Store(ProjectPaths(project).store)


def _without_eval_set(project: Path) -> str:
    """Drop [data.eval] from the project's config; returns the config as it was."""
    config = project / "kiwb.toml"
    text = config.read_text()
    section = text[text.index("[data.eval]"):text.index("[scoring]")]
    config.write_text(text.replace(section, ""))
    return text


@pytest.mark.slow
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
    assert {e["metric"] for e in evaluations} == {"accuracy"}  # what "accuracy" holds, named
    assert set(last["per_class_accuracy"]) == {"sports", "politics", "music", "cooking"}
    assert len(last["confusion"]) == 4 and sum(map(sum, last["confusion"])) == 40
    assert 0.0 <= last["macro_f1"] <= 1.0
    assert set(last["routing_accuracy"]) == {"mc_dropout", "plain_confidence", "chosen"}
    # the project sets none: auto, which chose this one (and says so in the run's manifest);
    # the run names it once, at its start
    chosen = ckpt.read_manifest(ProjectPaths(project).run_dir("hard"))["routing_choice"]["routing"]
    assert [start["routing"] for start in _events(project, "hard", "train.start")] == [chosen]

    run_dir = ProjectPaths(project).run_dir("hard")
    recorded_best = ckpt.read_best(run_dir)
    assert recorded_best["metrics"]["accuracy"] == best
    assert (run_dir / "checkpoints" / recorded_best["checkpoint"] / "model.safetensors").is_file()
    best_progress = ckpt.read_progress(run_dir / "checkpoints" / recorded_best["checkpoint"])
    assert best_progress["evaluation"] == recorded_best["metrics"]  # each checkpoint keeps its own
    manifest = ckpt.read_manifest(run_dir)
    assert manifest["labels"] == LABELS
    assert [t["name"] for t in manifest["teachers"]] == ["a", "b"]
    assert len(manifest["teachers"][0]["hash"]) == 64
    assert manifest["training"]["seed"] == 0 and manifest["method"]["method"] == "muki-hard"
    assert set(manifest["eval_data"]) == {"texts", "labels"}


def _weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(checkpoint / "model.safetensors")


@pytest.mark.slow
def test_killed_training_resumes_to_the_same_result(scored_project, tmp_path):
    straight = _copy_project(scored_project, tmp_path / "straight")
    killed = _copy_project(scored_project, tmp_path / "killed")
    for project in (straight, killed):  # long enough to be killed mid-way
        config = project / "kiwb.toml"
        config.write_text(config.read_text().replace("epochs = 8.0", "epochs = 12.0"))
    run_kiwb("train", straight, "--run", "r", cwd=tmp_path)

    worker = start_kiwb("train", killed, "--run", "r", "--foreground", cwd=tmp_path,
                        log=tmp_path / "train.log")
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
    # What a kill mid-write leaves, whether or not this one landed there: a staging folder.
    checkpoints = ckpt.checkpoints_dir(ProjectPaths(killed).run_dir("r"))
    (checkpoints / f".{ckpt.step_name(200)}.k1ll3d0x.tmp").mkdir()
    run_kiwb("train", killed, "--run", "r", "--resume", cwd=tmp_path)
    assert [p.name for p in checkpoints.iterdir() if p.name.startswith(".")] == []

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


@pytest.mark.slow
def test_export_round_trip_through_pipeline(scored_project, tmp_path):
    from transformers import AutoModelForSequenceClassification, pipeline

    project = _copy_project(scored_project, tmp_path / "proj")
    run_kiwb("train", project, "--run", "soft", "--method", "muki-soft", cwd=tmp_path)
    destination = tmp_path / "student"
    exported = run_kiwb("export", project, "--to", destination, cwd=tmp_path)  # the only run
    assert "Run soft, the newest of 1 (--run NAME for another)" in exported.stderr

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

    run_dir = ProjectPaths(project).run_dir("soft")
    best, run_manifest = ckpt.read_best(run_dir), ckpt.read_manifest(run_dir)
    _assert_card_and_manifest(destination, best, run_manifest)

    predicted = run_kiwb("predict", destination, *texts, cwd=tmp_path).stdout.splitlines()
    assert [line.split()[0] for line in predicted] == labels
    from_project = run_kiwb("predict", project, "--run", "soft", texts[0], cwd=tmp_path).stdout
    assert from_project.split()[0] == labels[0]  # the best checkpoint is what was exported

    again = run_kiwb("export", project, "--run", "soft", "--to", destination, cwd=tmp_path, check=False)
    assert again.returncode != 0 and "--force" in again.stderr
    run_kiwb("export", project, "--run", "soft", "--to", destination, "--force", cwd=tmp_path)
    assert (destination / "model.safetensors").is_file()
    _assert_force_replaces_only_an_empty_folder_or_an_export(project, tmp_path)


def _assert_card_and_manifest(destination: Path, best: dict, run_manifest: dict) -> None:
    """The model card and kiwb-manifest.json name everything the issue asks for."""
    import kiwb

    card = (destination / "README.md").read_text()
    metrics = best["metrics"]
    assert "`sports`, `politics`, `music`, `cooking`" in card
    for teacher in run_manifest["teachers"]:
        assert f"| {teacher['name']} | {', '.join(teacher['labels'])} | `{teacher['hash'][:16]}` |" in card
    assert "- method: `muki-soft` (tau = 0.2)" in card
    # the project sets no routing: auto, which names the one it chose and why
    choice = run_manifest["routing_choice"]
    assert (f"- routing: `{choice['chosen']}`, chosen by `auto`: {choice['why']}; margin "
            "re-weighting: True") in card
    for key, value in (("epochs", 8.0), ("learning_rate", 0.006), ("batch_size", 16), ("seed", 0)):
        assert f"- {key}: `{value}`" in card
    assert f"- checkpoint: `{best['checkpoint']}` (step {best['step']})" in card
    assert f"at step {best['step']} (40 texts)" in card
    assert f"- accuracy: {100 * metrics['accuracy']:.2f}%" in card
    assert f"- macro-F1: {100 * metrics['macro_f1']:.2f}%" in card
    routing = metrics["routing_accuracy"]
    assert f"- teacher-routing accuracy (mc dropout): {100 * routing['mc_dropout']:.2f}%" in card
    assert (f"- teacher-routing accuracy ({choice['routing']} routing): "
            f"{100 * routing['chosen']:.2f}%") in card
    for label in LABELS:
        assert f"| {label} | {100 * metrics['per_class_accuracy'][label]:.1f}% |" in card
    assert f"- kiwb's learning check: {metrics['check']['status']}" in card

    manifest = json.loads((destination / "kiwb-manifest.json").read_text())
    assert manifest == {
        "kiwb_version": kiwb.__version__, "run": "soft", "checkpoint": best["checkpoint"],
        "step": best["step"], "labels": LABELS, "teachers": run_manifest["teachers"],
        "method": run_manifest["method"], "training": run_manifest["training"],
        "learning_rate": 0.006, "student_base": run_manifest["student"], "data": run_manifest["data"],
        "eval_data": run_manifest["eval_data"], "evaluation": metrics,
        "routing_check": run_manifest["routing_check"],
        "class_funnel": run_manifest["class_funnel"], "kind": "sequence",
        # both tiny BERT teachers drop (0.2): what their score sets recorded, for the card
        "teacher_dropout": {"a": {"acts": True}, "b": {"acts": True}},
        # the eval set the run trained with, as kiwb.toml named it: the card's model-index
        "eval_source": run_manifest["eval_source"],
        # routing = "auto": what it chose, and the representations it measured them with
        "routing_choice": run_manifest["routing_choice"],
        "representations": run_manifest["representations"],
    }
    assert run_manifest["eval_source"]["path"].endswith("eval.jsonl")
    # the run's routing check travels into the card, as the learning check does
    assert f"- kiwb's routing check: {run_manifest['routing_check']['status']}" in card
    # and so does where each class went, with the student's own recall as the last step
    assert "## Where each class goes" in card
    funnel = card.split("## Where each class goes")[1]
    music = next(line for line in funnel.splitlines() if line.startswith("| music |"))
    assert f"{metrics['per_class_accuracy']['music']:.0%} |" in music


def _assert_force_replaces_only_an_empty_folder_or_an_export(project: Path, tmp_path: Path) -> None:
    from kiwb.workers.export import export_student

    shelf = tmp_path / "models"  # `--to ~/models --force` must not wipe a folder of other things
    shelf.mkdir()
    (shelf / "notes.txt").write_text("mine")
    with pytest.raises(KiwbError, match=f"neither an empty folder nor an earlier kiwb export.*{shelf / 'soft'}"):
        export_student(project, "soft", shelf, force=True)
    assert [p.name for p in shelf.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    export_student(project, "soft", empty, force=True)
    assert (empty / "model.safetensors").is_file()


def test_every_checkpoint_exports_with_its_own_evaluation(scored_project, tmp_path, monkeypatch):
    from kiwb.workers.export import export_student

    project = _copy_project(scored_project, tmp_path / "proj")
    monkeypatch.setattr(ckpt, "prune_checkpoints", lambda run_dir, keep: None)  # keep every step
    with _store(project) as store:
        trainer = _trainer(store, project, "r", epochs=4.0, eval_every=10)
        trainer.run(should_stop=lambda: trainer.step == 35)
    evaluations = {event.pop("step"): event for event in _events(project, "r", "train.eval")}
    assert sorted(evaluations) == [10, 20, 30]
    checkpoints = ckpt.checkpoints_dir(trainer.run_dir)
    (checkpoints / ckpt.step_name(20) / ckpt.STATE_FILE).unlink()  # export reads the small progress file
    progress = json.loads((checkpoints / ckpt.step_name(30) / ckpt.PROGRESS_FILE).read_text())
    del progress["evaluation"]  # as saved before checkpoints kept their evaluation: the store has it
    (checkpoints / ckpt.step_name(30) / ckpt.PROGRESS_FILE).write_text(json.dumps(progress))

    for step, metrics in evaluations.items():
        folder = export_student(project, "r", tmp_path / f"step{step}", checkpoint=str(step))
        assert json.loads((folder / "kiwb-manifest.json").read_text())["evaluation"] == metrics
        card = (folder / "README.md").read_text()
        assert f"at step {step} (40 texts)" in card and f"- accuracy: {100 * metrics['accuracy']:.2f}%" in card
    last = export_student(project, "r", tmp_path / "last", checkpoint="last")
    card = (last / "README.md").read_text()
    assert "`step-0000035` was saved between evaluations" in card and "No labeled evaluation" not in card


METHODS = {
    "vanilla-kd": ("vanilla-kd", {}),
    "uhc": ("uhc", {}),
    "supervised": ("supervised", {}),
    "muki-soft-no-mc": ("muki-soft", {"use_mc": False}),
    "muki-hard-no-reweight": ("muki-hard", {"reweight": False}),
}


@pytest.mark.slow
@pytest.mark.parametrize(("method", "ablation"), list(METHODS.values()), ids=list(METHODS))
def test_every_method_trains_with_the_same_loop(scored_project, tmp_path, method, ablation):
    project = _copy_project(scored_project, tmp_path / "proj")
    # Supervised must show it learns from the gold labels: 60 steps leave the tiny student's
    # accuracy to its seed (0.5 to 1.0), 120 steps do not.
    epochs = 12.0 if method == "supervised" else 6.0
    with _store(project) as store:
        trainer = _trainer(store, project, run=method, method=method, ablation=ablation,
                           epochs=epochs, seed=7)
        result = trainer.run()
    assert result["step"] == trainer.total_steps == 10 * epochs
    losses = [e["loss"] for e in _events(project, method, "train.step")]
    assert losses[-1] < losses[0]
    manifest = ckpt.read_manifest(trainer.run_dir)
    assert manifest["training"]["seed"] == 7
    assert {key: manifest["method"][key] for key in ablation} == ablation
    if ablation.get("reweight") is False:
        assert bool((trainer.data.weights == 1).all())
    if method == "supervised":
        assert result["best"]["accuracy"] > 0.5


@pytest.mark.slow
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


def test_resume_after_an_eval_set_was_added_is_refused(scored_project, tmp_path):
    project = _copy_project(scored_project, tmp_path / "proj")
    with_eval_set = _without_eval_set(project)
    with _store(project) as store:
        trainer = _trainer(store, project, "r", eval_every=10)
        trainer.run(should_stop=lambda: trainer.step == 15)
    assert (trainer.best.step, trainer.best.accuracy) == (10, None)  # nothing to measure
    # the pool's check: at step 10, before a quarter of the budget, the event gives no verdict
    # yet, while the best keeps the whole check (the kept checkpoint is judged whenever taken)
    said = _events(project, "r", "train.check")[0]["check"]
    assert 10 < trainer.total_steps / 4 and said["status"] == "too-early"
    assert trainer.best.check.status != "too-early" and trainer.best.check.fit == said["fit"]

    (project / "kiwb.toml").write_text(with_eval_set)
    with _store(project) as store, pytest.raises(KiwbError) as refused:
        _trainer(store, project, "r", resume=True, eval_every=10)
    message = str(refused.value)
    assert "labeled evaluation data was added, removed or changed" in message and "\n" not in message


@pytest.mark.parametrize(("accuracy", "metrics", "better"), [
    (0.5, {"accuracy": 0.6}, True),
    (0.5, {"accuracy": 0.5}, False),   # ties keep the earlier step
    (None, {"accuracy": 0.0}, True),   # nothing measured yet: -inf
    (0.5, None, True),                 # no eval set: the newest is best
])
def test_which_evaluation_beats_the_best(accuracy, metrics, better):
    from kiwb.project.records import BestCheckpoint

    assert BestCheckpoint(step=10, accuracy=accuracy).beaten_by(metrics) is better


def test_the_run_meant_when_none_is_named_is_the_one_written_last(tmp_path):
    """kiwb predict, evaluate and export without --run: the run whose newest checkpoint was
    written last (not the folder touched last, nor a run with no checkpoint yet)."""
    import os

    from kiwb.project.run_folder import newest_run

    runs = ProjectPaths(tmp_path).runs
    with pytest.raises(KiwbError, match=rf"^{tmp_path}: no trained runs yet; run: kiwb train "):
        newest_run(tmp_path)
    for run, steps, written in (("soft", (10, 20), 300), ("hard", (10,), 200),
                                ("started", (), 400)):
        (runs / run).mkdir(parents=True)
        for step in steps:  # a later step written later
            folder = ckpt.checkpoints_dir(runs / run) / ckpt.step_name(step)
            folder.mkdir(parents=True)
            os.utime(folder, (written + step, written + step))
    os.utime(runs / "hard", (1000, 1000))  # a folder touched later says nothing
    assert newest_run(tmp_path) == ("soft", "Run soft, the newest of 2 (--run NAME for another)")


def test_the_best_checkpoint_is_the_one_the_newest_checkpoint_names(
        scored_project, tmp_path, monkeypatch):
    """Stored once (kiwb.project.run_folder): a kill between two writes leaves no stale copy, and
    a best.json an older kiwb wrote is not read."""
    from kiwb.workers.export import choose_checkpoint

    project = _copy_project(scored_project, tmp_path / "proj")
    with monkeypatch.context() as keep_all, _store(project) as store:
        keep_all.setattr(ckpt, "prune_checkpoints", lambda run_dir, keep: None)
        trainer = _trainer(store, project, "r", epochs=4.0, eval_every=10)
        trainer.run(should_stop=lambda: trainer.step == 30)
    run_dir = trainer.run_dir
    named = ckpt.read_progress(ckpt.list_checkpoints(run_dir)[-1])["best"]
    stale = next(step for step in (10, 20, 30) if step != named["step"])
    (run_dir / "best.json").write_text(json.dumps(  # as kiwb wrote it before, naming another
        {"checkpoint": ckpt.step_name(stale), "step": stale, "metrics": {"accuracy": 0.0}}))
    best = ckpt.read_best(run_dir)
    assert best["checkpoint"] == ckpt.step_name(named["step"])
    assert best["metrics"] == ckpt.read_progress(
        ckpt.checkpoints_dir(run_dir) / best["checkpoint"])["evaluation"]
    assert best["metrics"]["accuracy"] == named["accuracy"] and best["check"] == named["check"]

    with _store(project) as store:
        trainer = _trainer(store, project, "r", resume=True, epochs=4.0, eval_every=10)
        trainer.run()
    final = ckpt.read_best(run_dir)
    assert choose_checkpoint(project, "r") == ckpt.checkpoints_dir(run_dir) / final["checkpoint"]
    assert final["step"] == ckpt.read_progress(ckpt.list_checkpoints(run_dir)[-1])["best"]["step"]

    newest = ckpt.checkpoints_dir(run_dir) / ckpt.step_name(999)  # names a checkpoint deleted by hand
    newest.mkdir()
    (newest / ckpt.PROGRESS_FILE).write_text(json.dumps({"step": 999, "best": {"step": 15}}))
    with pytest.raises(KiwbError, match="its newest checkpoint names step-0000015 the best, "
                                        "which is gone"):
        choose_checkpoint(project, "r")


@pytest.mark.slow
def test_the_resume_hint_of_a_train_job_that_failed_before_its_first_checkpoint_works(
        scored_project, tmp_path, student_base):
    project = _copy_project(scored_project, tmp_path / "proj")
    student = tmp_path / "student"  # empty yet: the job fails before its first checkpoint
    student.mkdir()
    failed = run_kiwb("train", project, "--run", "r", "--epochs", "1", "--student", student,
                      cwd=tmp_path, check=False)
    assert failed.returncode == 2
    jobs = run_kiwb("jobs", project, cwd=tmp_path).stdout
    hint = next(line.split("resume with: ", 1)[1] for line in jobs.splitlines() if "resume with: " in line)
    assert "--resume" in hint

    shutil.copytree(student_base, student, dirs_exist_ok=True)
    resumed = run_kiwb(*shlex.split(hint)[1:], cwd=tmp_path)
    assert "Run r has no checkpoint yet; starting it from step 0" in resumed.stderr
    assert ckpt.list_checkpoints(ProjectPaths(project).run_dir("r"))[-1].name == ckpt.step_name(10)


@pytest.mark.slow
def test_training_before_scoring_says_which_command_to_run(tmp_path, teachers_dir, data_dir, student_base):
    from cli_helpers import write_project

    project = write_project(tmp_path / "p", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
                            data_dir / "unlabeled.jsonl", extra=f'[training]\nstudent = "{student_base}"\n')
    result = run_kiwb("train", project, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert f"kiwb score {project}" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_student_base_that_is_not_a_sequence_classifier_is_refused(scored_project, tmp_path):
    from transformers import ViTConfig

    vision = tmp_path / "vit"
    ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32).save_pretrained(vision)
    project = _copy_project(scored_project, tmp_path / "proj")
    result = run_kiwb("train", project, "--student", vision, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "cannot be a sequence classifier" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_teach_makes_a_teacher_on_a_label_subset(tmp_path, student_base):
    from tiny import make_texts, write_jsonl
    from transformers import AutoModelForSequenceClassification

    data = write_jsonl(tmp_path / "labeled.jsonl", make_texts(120, seed=31))
    out = tmp_path / "teacher"
    result = run_kiwb("teach", "--base", student_base, "--data", data, "--dev", data,
                      "--labels", "music,cooking", "--out", out, "--epochs", "4", "--min-steps", "0",
                      "--learning-rate", "0.006", "--batch-size", "16", cwd=tmp_path)
    assert "Best dev accuracy" in result.stderr
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "music", 1: "cooking"}
    report = json.loads((out / "kiwb-teach.json").read_text())  # the kept epoch's dev figures
    assert report["labels"] == ["music", "cooking"] and report["check"]["status"] == "ok"
    assert report["dev"]["accuracy"] == pytest.approx(float(result.stderr.split("Best dev accuracy ")[1]
                                                            .split("%")[0]) / 100, abs=5e-5)
    again = run_kiwb("teach", "--base", student_base, "--data", data, "--labels", "music,cooking",
                     "--out", out, cwd=tmp_path, check=False)
    assert again.returncode == 2 and "--force" in again.stderr
    unknown = run_kiwb("teach", "--base", student_base, "--data", data, "--labels", "music,jazz",
                       "--out", tmp_path / "other", cwd=tmp_path, check=False)
    assert unknown.returncode == 2 and "jazz" in unknown.stderr and not (tmp_path / "other").exists()
    notes = tmp_path / "notes"  # --force replaces a checkpoint, never a folder of other things
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    kept = run_kiwb("teach", "--base", student_base, "--data", data, "--labels", "music,cooking",
                    "--out", notes, "--force", cwd=tmp_path, check=False)
    assert kept.returncode == 2 and "no config.json" in kept.stderr
    assert [path.name for path in notes.iterdir()] == ["todo.txt"]


@pytest.mark.slow
def test_the_cli_around_a_trained_run(scored_project, tmp_path):
    """The commands a user runs around a run, as the documentation lists them: detached training,
    the ablations' integration, evaluation on other data, predict --top, logs and jobs."""
    project = _copy_project(scored_project, tmp_path / "proj")
    summary = json.loads(run_kiwb("integrate", project, "--no-mc", "--no-reweight", "--threshold", "0.3",
                                  "--json", cwd=tmp_path).stdout)
    assert summary["conflict_threshold"] == 0.3 and sum(summary["wins"].values()) == 160

    started = run_kiwb("train", project, "--run", "r", "--epochs", "1", "--detach", cwd=tmp_path).stdout
    job_id = int(started.split("Started job ")[1].split()[0])
    run_kiwb("logs", job_id, project, "-f", cwd=tmp_path)  # returns once the job has ended
    log = run_kiwb("logs", job_id, project, cwd=tmp_path).stdout
    # One epoch is 10 steps: whether the learning check objects or not, the log ends the same way.
    warned = "Warning: the student of run r" in log
    assert ("Done, with the warning above. Export it anyway with" if warned else "Done. Export it with") in log
    listed = json.loads(run_kiwb("jobs", project, "--all", "--json", cwd=tmp_path).stdout)
    # The fixture's scoring, then ours: the integration above is a job too.
    assert [job["kind"] for job in listed] == ["score", "integrate", "train"]
    assert (listed[-1]["id"], listed[-1]["status"]) == (job_id, "finished")

    held_out = tmp_path / "held_out.csv"
    held_out.write_text("body,topic\nthe striker scored a goal,sports\nthe band played a new song,music\n")
    evaluated = run_kiwb("evaluate", project, "--checkpoint", "last", "--data", held_out,
                         "--text-column", "body", "--label-column", "topic", "--json", cwd=tmp_path)
    assert "Run r, the newest of 1 (--run NAME for another)" in evaluated.stderr  # no --run given
    report = json.loads(evaluated.stdout)
    assert report["checkpoint"].startswith("step-") and set(report["per_class_accuracy"]) == set(LABELS)
    assert 0.0 <= report["accuracy"] <= 1.0 and len(report["confusion"]) == len(LABELS)

    predicted = run_kiwb("predict", project, "--run", "r", "--top", "2", "a late goal", cwd=tmp_path)
    shares = re.findall(r"(\w+) (\d+\.\d)%", predicted.stdout)
    assert predicted.stdout.split()[0] in LABELS and len(shares) == 2  # --top 2: two labels shown
    assert {label for label, _ in shares} <= set(LABELS)


@pytest.mark.slow
def test_a_student_trained_too_briefly_is_flagged_and_one_trained_enough_is_not(scored_project, tmp_path):
    """The learning check names the classes a collapsed student never predicts, in the log,
    the run's events, `kiwb jobs` and the job record; a student trained long enough passes."""
    project = _copy_project(scored_project, tmp_path / "proj")
    brief = run_kiwb("train", project, "--run", "brief", "--epochs", "0.1", "--min-steps", "2",
                     cwd=tmp_path)
    evaluation = _events(project, "brief", "train.eval")[-1]
    confusion = evaluation["confusion"]
    never = [label for i, label in enumerate(LABELS) if not sum(row[i] for row in confusion)]
    assert never  # two steps from a random head: most texts go to one or two classes
    assert evaluation["check"]["status"] == "collapsed" and evaluation["check"]["collapsed"][:len(never)] == never
    # two steps do not teach the student its own targets: training is named as the cause
    assert evaluation["check"]["cause"] == "training" and evaluation["fit"] < 0.9
    warning = " ".join(next(line for line in brief.stderr.split("\n\n") if "Warning:" in line).split())
    assert f"never predicts {', '.join(never)}" in warning and "min_steps" in warning
    assert (f"it does not fit its targets ({100 * evaluation['fit']:.1f}% on the pool texts it "
            "trained on), so training is at fault") in warning
    assert "Done, with the warning above" in brief.stderr
    jobs = run_kiwb("jobs", project, cwd=tmp_path).stdout
    assert "⚠ collapsed" in jobs and "[training] min_steps" in jobs and f"never predicts {', '.join(never)}" in " ".join(jobs.split())
    assert f"fit {100 * evaluation['fit']:.1f}%" in jobs
    recorded = json.loads(run_kiwb("jobs", project, "--json", cwd=tmp_path).stdout)[-1]
    assert recorded["ending"]["check"]["collapsed"][:len(never)] == never

    enough = run_kiwb("train", project, "--run", "enough", cwd=tmp_path)  # the fixture's 80 steps
    assert "Warning" not in enough.stderr and "Done. Export it with" in enough.stderr
    assert re.search(r"Step 80/80: .*; fits its targets \d+\.\d%", enough.stderr)
    best = _events(project, "enough", "train.done")[-1]["best"]
    assert best["check"]["status"] == "ok" and best["fit"] >= 0.9 and best["check"]["fit"] == best["fit"]
    table = run_kiwb("jobs", project, cwd=tmp_path).stdout
    row = table.splitlines().index(next(line for line in table.splitlines() if " enough " in line))
    assert "finished" in table.splitlines()[row] and "⚠" not in table.splitlines()[row]
    assert f"fit {100 * best['fit']:.1f}%" in table.splitlines()[row + 1]


@pytest.mark.slow
def test_a_student_that_fits_labels_contradicting_gold_blames_the_labels(scored_project, tmp_path):
    """Pool labels shifted on purpose (each text taught the next topic): the supervised
    student learns them, so it fits them, and the check says the labels are at fault (too few,
    or disagreeing with the eval set's), not the training."""
    project = _copy_project(scored_project, tmp_path / "proj")
    config = project / "kiwb.toml"
    pool = re.search(r'path = "([^"]*pool.jsonl)"', config.read_text()).group(1)
    rows = [json.loads(line) for line in Path(pool).read_text().splitlines()]
    shifted = tmp_path / "shifted.jsonl"
    shifted.write_text("".join(json.dumps({**row, "label": LABELS[(LABELS.index(row["label"]) + 1) % 4]})
                               + "\n" for row in rows))
    config.write_text(config.read_text().replace(pool, str(shifted)))
    wrong = run_kiwb("train", project, "--run", "wrong", "--method", "supervised", cwd=tmp_path)
    fits = [event["fit"] for event in _events(project, "wrong", "train.eval")]
    assert max(fits) >= 0.9  # it learnt the shifted labels
    best = _events(project, "wrong", "train.done")[-1]["best"]
    assert best["check"]["status"] != "ok" and best["check"]["cause"] == "labels"
    # the kept checkpoint is an early one, from before it fitted them: the run's best fit tells
    reached = best["check"]["fit_reached"] or best["fit"]
    assert reached == max(fits)
    warning = " ".join(wrong.stderr.split())
    assert f"it fits its training labels ({100 * reached:.1f}%" in warning
    assert ("so more steps will not help: those labels are too few, or disagree with the eval "
            "set's; label more texts, compare the pool's labels with the eval set's") in warning
    run_kiwb("export", project, "--run", "wrong", cwd=tmp_path)
    card = " ".join((project / "exports" / "wrong" / "README.md").read_text().split())
    assert "or disagree with the eval set's" in card and "- fit to its training targets" in card


@pytest.mark.slow
def test_a_teacher_that_learned_nothing_is_refused_where_it_is_added(tmp_path, student_base, teachers_dir):
    """`kiwb teach` writes its dev figures beside the checkpoint; a teacher whose figures say
    it never predicts one of its labels is refused by `kiwb init`, by scoring and in the
    workbench, naming the labels and what to do."""
    from tiny import make_texts, write_jsonl

    from kiwb.errors import ConfigError
    from kiwb.project.config import load_config
    from kiwb.project.teach_report import read_check
    from kiwb.tui.config_edit import add_teacher
    from kiwb.tui.inspect import inspect_teacher

    data = write_jsonl(tmp_path / "labeled.jsonl", make_texts(120, seed=31))
    out = tmp_path / "brief-teacher"
    taught = run_kiwb("teach", "--base", student_base, "--data", data, "--dev", data,
                      "--labels", "music,cooking", "--out", out, "--epochs", "0.05",
                      "--min-steps", "0", "--learning-rate", "1e-6", "--batch-size", "16",
                      cwd=tmp_path)
    check = read_check(out)
    assert check is not None and check.status == "collapsed" and len(check.collapsed) == 1
    never = check.collapsed[0]
    said = " ".join(taught.stderr.split())
    assert f"this teacher has collapsed classes: never predicts {never}" in said
    assert "kiwb will refuse it as a teacher" in taught.stderr
    # what to try, for a teacher taught without balancing: more steps, a higher rate, balance
    assert ("teach it again with more steps (--min-steps or --epochs) or a higher "
            "--learning-rate, or balance its classes (--balance sampler)") in said

    refused = run_kiwb("init", tmp_path / "proj", "--teacher", f"brief={out}",
                       "--teacher", f"a={teachers_dir / 'teacher_a'}", cwd=tmp_path, check=False)
    line = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and f"teacher 'brief': {out}/kiwb-teach.json says it has collapsed classes" in line
    assert f"never predicts {never}" in line and "--epochs" in line and "remove it" in line
    assert "to use it anyway, delete kiwb-teach.json" in line
    assert not (tmp_path / "proj" / "kiwb.toml").exists()

    project = tmp_path / "proj"
    run_kiwb("init", project, "--teacher", f"a={teachers_dir / 'teacher_a'}",
             "--teacher", f"b={teachers_dir / 'teacher_b'}", "--unlabeled", data, cwd=tmp_path)
    config = load_config(project)
    with pytest.raises(ConfigError, match=f"never predicts {never}"):
        add_teacher(config, "brief", str(out))
    assert "brief" not in (project / "kiwb.toml").read_text()
    # Written into kiwb.toml by hand: the workbench shows the problem, scoring refuses it.
    toml = project / "kiwb.toml"
    toml.write_text(toml.read_text().replace(str(teachers_dir / "teacher_b"), str(out)))
    config = load_config(project)
    assert f"never predicts {never}" in inspect_teacher(config, config.teacher("b")).problem
    scored = run_kiwb("score", project, cwd=tmp_path, check=False)
    assert scored.returncode == 2 and f"teacher 'b': {out}/kiwb-teach.json" in " ".join(scored.stderr.split())


@pytest.mark.slow
def test_without_an_eval_set_the_pool_predictions_are_checked_against_the_targets(scored_project, tmp_path):
    project = _copy_project(scored_project, tmp_path / "proj")
    _without_eval_set(project)
    brief = run_kiwb("train", project, "--run", "brief", "--epochs", "0.1", "--min-steps", "2",
                     cwd=tmp_path)
    check = _events(project, "brief", "train.check")[-1]["check"]
    assert check["status"] == "collapsed" and check["collapsed"]
    warning = " ".join(brief.stderr.split())
    assert f"never predicts {', '.join(check['collapsed'])} on 160 pool texts" in warning
    assert "Done, with the warning above" in warning

    run_kiwb("train", project, "--run", "enough", cwd=tmp_path)
    assert _events(project, "enough", "train.done")[-1]["best"]["check"]["status"] == "ok"


def test_a_refused_resume_names_the_training_settings_that_changed(scored_project, tmp_path):
    project = _copy_project(scored_project, tmp_path / "proj")
    with _store(project) as store:
        trainer = _trainer(store, project, "r", eval_every=10)
        trainer.run(should_stop=lambda: trainer.step == 5)
    with _store(project) as store, pytest.raises(KiwbError) as refused:
        _trainer(store, project, "r", resume=True, eval_every=10, learning_rate=0.001)
    assert "the training settings changed since it started (learning_rate: 0.006 -> 0.001)" in str(refused.value)
