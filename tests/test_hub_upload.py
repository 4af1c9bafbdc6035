"""To the Hub: the export's model card carries the Hub's metadata (model-index, base_model,
pipeline_tag, library_name, tags) that huggingface_hub's ModelCard reads back, and
`kiwb export --push-to-hub ORG/NAME [--private]` uploads the folder. The upload cannot reach
the real Hub from here: tests/fake_hub.py, a local HTTP server set through HF_ENDPOINT, stands
in for it, the one service these tests replace."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import kiwb_env, run_kiwb
from fake_hub import serve
from test_bad_input import assert_refused

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers.export import model_card

MANIFEST = {"run": "muki-hard", "checkpoint": "step-0000040", "step": 40, "kind": "sequence",
            "labels": ["sports", "politics", "music", "cooking"], "teachers": [],
            "method": {"method": "muki-hard"}, "student_base": "google-bert/bert-base-uncased",
            "evaluation": {"accuracy": 0.8125, "macro_f1": 0.7931, "num_texts": 32,
                           "per_class_accuracy": {"sports": 0.9}},
            "eval_source": {"path": "hf://datasets/fancyzhx/ag_news", "split": "test",
                            "subset": None}}


def read_card(text: str):
    from huggingface_hub import ModelCard

    return ModelCard(text).data


def test_the_card_carries_the_hubs_metadata_and_model_index():
    data = read_card(model_card(MANIFEST))
    assert (data.library_name, data.pipeline_tag) == ("transformers", "text-classification")
    assert data.base_model == "google-bert/bert-base-uncased" and data.datasets == ["fancyzhx/ag_news"]
    assert {"kiwb", "knowledge-distillation"} <= set(data.tags)
    results = {(r.metric_type, r.metric_name): r for r in data.eval_results}
    assert set(results) == {("accuracy", "accuracy"), ("f1", "macro-F1")}
    accuracy = results["accuracy", "accuracy"]
    assert accuracy.metric_value == 0.8125 and accuracy.task_type == "text-classification"
    assert (accuracy.dataset_type, accuracy.dataset_split) == ("fancyzhx/ag_news", "test")
    assert results["f1", "macro-F1"].metric_value == 0.7931


def test_a_local_base_and_eval_file_stay_out_of_the_hubs_links():
    local = {**MANIFEST, "student_base": "/models/my-bert",
             "eval_source": {"path": "/data/eval.jsonl", "split": None, "subset": None}}
    data = read_card(model_card(local))
    assert data.base_model is None and data.datasets is None  # the Hub would refuse them
    assert data.eval_results[0].dataset_name == "eval.jsonl (the project's eval set)"
    bare = read_card(model_card({**MANIFEST, "evaluation": None}))
    assert bare.eval_results is None and bare.pipeline_tag == "text-classification"


def hub_env(hub_endpoint: str | None, home: Path, token: str | None = "hf_kiwb_test") -> dict:
    """kiwb's test environment, online (no HF_HUB_OFFLINE), with its own HF_HOME."""
    env = {key: value for key, value in kiwb_env().items()
           if key not in ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env["HF_HOME"] = str(home)
    if hub_endpoint:
        env["HF_ENDPOINT"] = hub_endpoint
    if token:
        env["HF_TOKEN"] = token
    return env


def kiwb_with(env: dict, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiwb", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def push(env: dict, project: Path, tmp_path: Path, repo: str, *extra: str):
    """`kiwb export PROJECT --run r --to TMP/out --push-to-hub REPO` in `env`."""
    return kiwb_with(env, "export", project, "--run", "r", "--to", tmp_path / "out",
                     "--push-to-hub", repo, *extra, cwd=tmp_path)


@pytest.fixture(scope="module")
def trained(scored_project, tmp_path_factory) -> Path:
    project = tmp_path_factory.mktemp("hub-upload") / "proj"
    shutil.copytree(scored_project, project, ignore=shutil.ignore_patterns("runs", "exports"))
    run_kiwb("train", project, "--run", "r", cwd=project.parent)
    return project


def test_export_pushes_the_folder_and_its_card_to_the_hub(trained, tmp_path):
    hub, server = serve()
    try:
        done = push(hub_env(hub.endpoint, tmp_path / "home"), trained, tmp_path,
                    "kiwb-org/student", "--private")
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert hub.repos["kiwb-org/student"]["visibility"] == "private"
    assert hub.tokens == {"Bearer hf_kiwb_test"}
    exported = tmp_path / "out"
    assert set(hub.files) == {path.name for path in exported.iterdir()}
    assert hub.files["model.safetensors"] == (exported / "model.safetensors").read_bytes()
    figures = json.loads((exported / "kiwb-manifest.json").read_text())["evaluation"]
    uploaded = read_card(hub.files["README.md"].decode())
    accuracy = next(r for r in uploaded.eval_results if r.metric_type == "accuracy")
    assert accuracy.metric_value == round(figures["accuracy"], 4)
    assert accuracy.dataset_name == "eval.jsonl (the project's eval set)"
    with Store(ProjectPaths(trained).store) as store:
        ending = store.jobs.all()[-1].ending
    assert ending["hub"] == f"{hub.endpoint}/kiwb-org/student/commit/{'a' * 40}"


@pytest.mark.parametrize(("case", "repo", "fragments"), [
    ("no token", "kiwb-org/student", ["no Hugging Face token", "hf auth login", "HF_TOKEN"]),
    ("offline", "kiwb-org/student", ["HF_HUB_OFFLINE is set"]),
    ("bad id", "student", ["give a model repository as ORG/NAME"]),
    ("a name the Hub refuses", "kiwb-org/student.", ["not a name the Hub takes"]),
])
def test_an_upload_that_cannot_start_is_refused_before_anything_is_exported(
        trained, tmp_path, case, repo, fragments):
    env = hub_env(None, tmp_path / "home", token=None if case == "no token" else "hf_x")
    if case == "offline":
        env["HF_HUB_OFFLINE"] = "1"
    with Store(ProjectPaths(trained).store) as store:
        jobs_before = len(store.jobs.all())
    refused = push(env, trained, tmp_path, repo)
    assert_refused(refused, "--push-to-hub", repo, *fragments)
    assert not (tmp_path / "out").exists()
    with Store(ProjectPaths(trained).store) as store:
        assert len(store.jobs.all()) == jobs_before  # no job recorded


@pytest.mark.slow
def test_a_refused_upload_is_one_line_and_the_export_is_kept(trained, tmp_path):
    hub, server = serve()
    try:
        failed = push(hub_env(hub.endpoint, tmp_path / "home"), trained, tmp_path,
                      "kiwb-org/forbidden")
    finally:
        server.shutdown()
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    said = " ".join(failed.stderr.split())
    assert (f"upload to kiwb-org/forbidden refused by {hub.endpoint} (HTTP 403): You don't "
            "have the rights") in said
    assert (tmp_path / "out" / "model.safetensors").is_file() and not hub.files
    assert "hf upload kiwb-org/forbidden" in said  # how to retry without exporting again


@pytest.mark.slow
def test_an_unreachable_hub_is_one_line_and_the_export_is_kept(trained, tmp_path):
    hub, server = serve()
    server.shutdown()  # nothing listens on its port any more
    server.server_close()
    failed = push(hub_env(hub.endpoint, tmp_path / "home"), trained, tmp_path,
                  "kiwb-org/student")
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    said = " ".join(failed.stderr.split())
    assert f"upload to kiwb-org/student via {hub.endpoint} failed:" in said
    assert (tmp_path / "out" / "model.safetensors").is_file()
