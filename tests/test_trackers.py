"""Experiment trackers (`[training] report_to`): a run sends its losses, eval figures per step,
fit, settings and best figures to TensorBoard, W&B and MLflow, and the tests read back what
each wrote with the tracker's own reader: TensorBoard's event files, W&B's offline run folder
and MLflow's local file store. A tracker not installed is one line before any job starts."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import kiwb_env
from test_bad_input import assert_refused

from kiwb.project.paths import ProjectPaths
from kiwb.project.records import (
    BestCheckpoint,
    RoutingAccuracy,
    TrainCheck,
    TrainDone,
    TrainEval,
    TrainStep,
)
from kiwb.project.store import Store
from kiwb.workers.trackers import final_figures, flat, scalars


def test_each_event_gives_the_figures_a_tracker_shows():
    assert scalars(TrainStep(step=10, loss=0.25, lr=1e-4, texts_per_s=50.0, total_steps=40)) == {
        "train/loss": 0.25, "train/learning_rate": 1e-4, "train/texts_per_s": 50.0}
    evaluation = TrainEval(step=20, accuracy=0.75, metric="entity F1", macro_f1=0.5,
                           per_class_accuracy={}, confusion=[], num_texts=8, fit=0.9,
                           routing_accuracy=RoutingAccuracy(mc_dropout=0.8, plain_confidence=0.7,
                                                            chosen=0.85))
    assert scalars(evaluation) == {"eval/entity_F1": 0.75, "eval/macro_f1": 0.5, "train/fit": 0.9,
                                   "eval/routing_accuracy": 0.85}
    from kiwb.core.learning_check import LearningCheck

    check = TrainCheck(step=30, check=LearningCheck(status="ok"), fit=0.6)
    assert scalars(check) == {"train/fit": 0.6}
    done = TrainDone(step=40, best=BestCheckpoint(step=20, accuracy=0.75, metric="accuracy", fit=0.9))
    assert final_figures(done) == {"best/step": 20.0, "best/accuracy": 0.75, "best/fit": 0.9}
    assert final_figures(TrainDone(step=40, best=None)) == {}
    assert flat({"a": 1, "b": {"c": 2, "d": {"e": 3}}}) == {"a": 1, "b.c": 2, "b.d.e": 3}


def test_an_unknown_tracker_is_refused_in_one_line(tmp_path):
    from kiwb.errors import ConfigError
    from kiwb.project.config import load_config

    (tmp_path / "kiwb.toml").write_text('name = "t"\n[training]\nreport_to = ["tensorboard", '
                                        '"comet"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(tmp_path)
    assert ('[training] report_to lists "comet", which is not one of tensorboard, wandb, mlflow'
            in str(refused.value))


def test_a_tracker_not_installed_is_refused_before_the_job_is_recorded(scored_project, tmp_path,
                                                                       monkeypatch):
    """What a machine without wandb sees: its package looked up under a name no machine has."""
    from kiwb.errors import ConfigError
    from kiwb.project import tracker_check
    from kiwb.project.job_checks import check_before_recording
    from kiwb.project.job_specs import TrainSpec

    project = copy_project(scored_project, tmp_path, 'report_to = ["tensorboard", "wandb"]')
    monkeypatch.setitem(tracker_check.MODULES, "wandb", "kiwb_test_no_such_package")
    with pytest.raises(ConfigError) as refused:
        check_before_recording(TrainSpec(run="r"), project / "kiwb.toml")
    assert str(refused.value) == (
        f"{project / 'kiwb.toml'}: [training] report_to names wandb, which is not installed; "
        "pip install 'kiwb[wandb]', or take it out of report_to")


def test_a_tracker_that_fails_is_said_and_dropped_and_the_run_goes_on(tmp_path, monkeypatch,
                                                                     capsys):
    """A tracker's failure is not the run's: one line, then the others go on."""
    from kiwb.workers import trackers

    logged = []

    class Failing:
        name, id = "tensorboard", None

        def __init__(self, run, folder, settings, resume=None):
            pass

        def log(self, figures, step):
            raise RuntimeError("disk full")

    class Keeping:
        name, id = "wandb", None

        def __init__(self, run, folder, settings, resume=None):
            pass

        def log(self, figures, step):
            logged.append((step, figures))

        def summary(self, figures, step):
            logged.append(("summary", figures))

        def close(self, outcome):
            logged.append(outcome)

    monkeypatch.setattr(trackers, "TRACKER_TYPES", {"tensorboard": Failing, "wandb": Keeping})
    from kiwb.project.records import TrainStart

    kept = trackers.Trackers(("tensorboard", "wandb"), "r", tmp_path, {})
    kept.record(TrainStart(step=0, total_steps=20, method="muki-hard"))
    for step in (10, 20):
        kept.record(TrainStep(step=step, loss=0.5, lr=1e-4, texts_per_s=9.0, total_steps=20))
    kept.record(TrainDone(step=20, best=None))
    said = " ".join(capsys.readouterr().err.split())
    assert said.count("report_to tensorboard: RuntimeError: disk full") == 1
    assert [entry[0] for entry in logged[:3]] == [10, 20, "summary"] and logged[-1] == "finished"


def test_a_resumed_run_goes_on_in_its_trackers_run(tmp_path, monkeypatch):
    """MLflow's file store, in this process: the resumed run's curve continues the first's."""
    from mlflow.tracking import MlflowClient

    from kiwb.project.records import TrainStart
    from kiwb.workers.trackers import IDS_FILE, Trackers

    tracking = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    folder = tmp_path / "runs" / "r"

    def part(first: int, last: int, done: bool) -> None:
        trackers = Trackers(("mlflow",), "r", folder, {"project": "resume", "training": {"seed": 0}})
        trackers.record(TrainStart(step=first, total_steps=last, method="muki-hard"))
        for step in range(first + 10, last + 1, 10):
            trackers.record(TrainStep(step=step, loss=1 / step, lr=1e-4, texts_per_s=9.0,
                                      total_steps=last))
        trackers.close("finished" if done else "stopped")

    part(0, 20, done=False)
    first_id = json.loads((folder / IDS_FILE).read_text())["mlflow"]
    part(20, 40, done=True)
    assert json.loads((folder / IDS_FILE).read_text())["mlflow"] == first_id
    client = MlflowClient(tracking)
    history = client.get_metric_history(first_id, "train/loss")
    assert sorted(m.step for m in history) == [10, 20, 30, 40]
    assert client.get_run(first_id).info.status == "FINISHED"
    (experiment,) = [e for e in client.search_experiments() if e.name == "resume"]
    assert len(client.search_runs([experiment.experiment_id])) == 1


def test_mlflow_without_a_store_it_can_write_is_said_before_the_run(monkeypatch):
    """MLflow 3's default store is a local database only the full package writes."""
    import importlib.util

    from kiwb.project.tracker_check import tracker_problem

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    if importlib.util.find_spec("sqlalchemy") is None:  # kiwb[mlflow]: the client alone
        assert "MLFLOW_TRACKING_URI is not set" in tracker_problem(("mlflow",), "kiwb.toml")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert tracker_problem(("mlflow", "tensorboard"), "kiwb.toml") is None


def test_wandb_without_a_key_is_said_before_the_run(tmp_path, monkeypatch):
    """Online W&B needs a key: said in one line instead of a login prompt or a failed init."""
    from kiwb.project.tracker_check import tracker_problem

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert "no W&B API key" in tracker_problem(("wandb",), "kiwb.toml")
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert tracker_problem(("wandb",), "kiwb.toml") is None
    monkeypatch.delenv("WANDB_MODE")
    (tmp_path / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password k" + "0" * 39 + "\n")
    (tmp_path / ".netrc").chmod(0o600)
    assert tracker_problem(("wandb",), "kiwb.toml") is None  # `wandb login`'s entry


def copy_project(scored_project: Path, tmp_path: Path, training_line: str) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project, ignore=shutil.ignore_patterns("runs", "exports"))
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace("[training]\n", f"[training]\n{training_line}\n", 1))
    return project


def wandb_records(run_file: Path) -> list:
    """The records of a W&B run file (LevelDB's log format after a 7-byte W&B header: blocks
    of 32 KiB, each record a CRC, a length, a type and a protobuf Record, split across blocks
    as FIRST, MIDDLE and LAST parts)."""
    from wandb.proto import wandb_internal_pb2

    data, block, records, parts = run_file.read_bytes(), 32768, [], b""
    assert data[:4] == b":W&B"
    position = 7
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position:position + 7])
        if length == 0 and kind == 0:
            break
        parts += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            records.append(record)
            parts = b""
    return records


def read_wandb(folder: Path) -> tuple[list[dict], dict, dict]:
    """History rows, summary and config of the one offline run W&B wrote under `folder`."""
    (run_file,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    history, summary, config = [], {}, {}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
        elif kind == "summary":
            summary.update({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.summary.update})
        elif kind == "run":  # the config wandb.init was given
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
    return history, summary, config


@pytest.mark.slow
def test_a_run_reports_to_tensorboard_wandb_and_mlflow(scored_project, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    project = copy_project(scored_project, tmp_path,
                           'report_to = ["tensorboard", "wandb", "mlflow"]')
    tracking = f"file:{tmp_path / 'mlruns'}"
    env = {**kiwb_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "MLFLOW_TRACKING_URI": tracking, "MLFLOW_ALLOW_FILE_STORE": "true"}
    done = subprocess.run([sys.executable, "-m", "kiwb", "train", str(project), "--run", "r"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "report_to" not in done.stdout + done.stderr  # no tracker said it failed
    with Store(ProjectPaths(project).store) as store:
        steps = {e["data"]["step"]: e["data"] for e in store.events_after(run="r", kind="train.step")}
        evals = {e["data"]["step"]: e["data"] for e in store.events_after(run="r", kind="train.eval")}
        (done_event,) = [e["data"] for e in store.events_after(run="r", kind="train.done")]
    assert steps and evals
    run_dir = ProjectPaths(project).run_dir("r")

    board = EventAccumulator(str(run_dir / "tensorboard"))
    board.Reload()
    losses = {s.step: s.value for s in board.Scalars("train/loss")}
    assert losses.keys() == steps.keys()
    assert all(abs(losses[step] - steps[step]["loss"]) < 1e-6 for step in steps)
    accuracy = {s.step: s.value for s in board.Scalars("eval/accuracy")}
    assert all(abs(accuracy[step] - evals[step]["accuracy"]) < 1e-6 for step in evals)
    assert {s.step: round(s.value, 6) for s in board.Scalars("train/fit")} == {
        step: round(e["fit"], 6) for step, e in evals.items()}

    history, summary, config = read_wandb(run_dir)
    logged = {row["_step"]: row for row in history}
    assert {step: row["train/loss"] for step, row in logged.items() if "train/loss" in row} == {
        step: pytest.approx(e["loss"]) for step, e in steps.items()}
    assert {step: row["eval/accuracy"] for step, row in logged.items() if "eval/accuracy" in row} \
        == {step: pytest.approx(e["accuracy"]) for step, e in evals.items()}
    assert summary["best/accuracy"] == pytest.approx(done_event["best"]["accuracy"])
    assert config["training.epochs"] == 8.0 and config["run"] == "r"

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3's opt-in to read it
    client = MlflowClient(tracking)
    (run,) = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert run.info.run_name == "r" and run.info.status == "FINISHED"
    history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "eval/accuracy")}
    assert history == {step: pytest.approx(e["accuracy"]) for step, e in evals.items()}
    assert run.data.params["training.epochs"] == "8.0"
    assert run.data.metrics["best/accuracy"] == pytest.approx(done_event["best"]["accuracy"])


def test_the_cli_refuses_a_misspelt_tracker(scored_project, tmp_path):
    from cli_helpers import run_kiwb

    project = copy_project(scored_project, tmp_path, 'report_to = "tensorboard"')
    assert_refused(run_kiwb("train", project, "--run", "r", cwd=tmp_path, check=False),
                   "kiwb.toml", "report_to")
