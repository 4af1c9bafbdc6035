"""Rare classes end to end: kiwb integrate shows the class funnel, the corrections change the
targets, and a student keeps a class its targets used to starve (tiny real models)."""

from __future__ import annotations

import shutil

import pytest
from test_cli_tables import piped_kiwb

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path, scored_project):
    """A copy of the scored project (scores reused), so each test changes only its own."""
    return shutil.copytree(scored_project, tmp_path / "proj",
                           ignore=shutil.ignore_patterns("runs", "exports"))


def test_integrate_prints_the_class_funnel_at_80_columns(project):
    shown = piped_kiwb("integrate", project, "--foreground", cwd=project.parent)
    print(shown)
    assert "Where each class goes" in shown
    for label in ("sports", "politics", "music", "cooking"):
        assert label in shown


@pytest.fixture(scope="module")
def rare_pool_project(tmp_path_factory, teachers_dir, student_base):
    """A pool where cooking is 2% (4 of 200 texts): kiwb's routing keeps its texts, but a
    plain student never predicts it. Scored once; each test trains its own runs."""
    from cli_helpers import run_kiwb, write_project
    from tiny import make_texts, write_jsonl

    root = tmp_path_factory.mktemp("rare_pool")
    drawn = make_texts(400, seed=21)
    rows = ([row for row in drawn if row["label"] != "cooking"][:196]
            + [row for row in drawn if row["label"] == "cooking"][:4])
    write_jsonl(root / "pool.jsonl", rows)
    write_jsonl(root / "eval.jsonl", make_texts(40, seed=22))
    project = write_project(
        root / "proj", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
        root / "pool.jsonl", root / "eval.jsonl", scoring="mc_passes = 4\nshard_size = 64\n",
        extra=(f'[training]\nstudent = "{student_base}"\nepochs = 8.0\nmin_steps = 0\n'
               "learning_rate = 0.006\nbatch_size = 16\neval_every = 25\n"))
    run_kiwb("score", project, cwd=root)
    return project


def _kept(project, run: str) -> tuple[dict, dict]:
    import json

    folder = project / "runs" / run
    best = json.loads((folder / "best.json").read_text(encoding="utf-8"))["metrics"]
    funnel = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["class_funnel"]
    return best, funnel


def test_a_rare_class_lost_by_the_student_is_kept_with_class_weighting(rare_pool_project):
    from cli_helpers import run_kiwb

    project = rare_pool_project
    run_kiwb("train", project, "--run", "plain", "--foreground", cwd=project.parent)
    run_kiwb("train", project, "--run", "weighted", "--class-weighting", "0.5", "--foreground",
             cwd=project.parent)
    plain, funnel = _kept(project, "plain")
    weighted, _ = _kept(project, "weighted")
    cooking = funnel["labels"].index("cooking")
    # The funnel puts the loss at the student: the teacher says cooking on its eval texts, the
    # routing and the targets keep them, yet the student never predicts it.
    assert funnel["labeled"]["target_recall"][cooking] >= 0.8
    assert funnel["target_share"][cooking] < 0.05
    assert plain["per_class_accuracy"]["cooking"] == 0.0
    # Weighting texts by 1 / sqrt(their class's share of the targets) keeps it.
    assert weighted["per_class_accuracy"]["cooking"] >= 0.5
    assert weighted["macro_f1"] > plain["macro_f1"] + 0.1
    assert weighted["accuracy"] > plain["accuracy"]
