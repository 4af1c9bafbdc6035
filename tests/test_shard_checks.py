"""Score and representation shards that say what they hold (issue 59): a shard swapped,
truncated or deleted on disk is named in one line by whatever reads it, and the next
`kiwb score` scores it again, keeping the rest; through the real CLI on tiny real teachers."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_kiwb, write_project
from test_bad_input import assert_refused
from tiny import make_texts, write_jsonl


@pytest.fixture(scope="module")
def scored(tmp_path_factory, teachers_dir) -> Path:
    """48 pool texts in 3 shards of 16 per teacher, and 16 eval texts, scored once."""
    root = tmp_path_factory.mktemp("shards")
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(48, seed=61)])
    write_jsonl(root / "eval.jsonl", make_texts(16, seed=62))
    project = write_project(root / "proj", {"a": teachers_dir / "teacher_a",
                                            "b": teachers_dir / "teacher_b"},
                            root / "pool.jsonl", root / "eval.jsonl")
    run_kiwb("score", project, cwd=root)
    return project


def copy_of(scored: Path, tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(scored, project)
    return project


def shard_files(project: Path, teacher: str, dataset: str = "unlabeled") -> list[Path]:
    with sqlite3.connect(project / "store.sqlite") as db:
        key = db.execute("SELECT key FROM score_sets WHERE teacher = ? AND dataset = ?",
                         (teacher, dataset)).fetchone()[0]
    return sorted((project / "scores" / key).glob("shard-*.npz"))


def integrated(project: Path) -> dict:
    return json.loads(run_kiwb("integrate", project, "--json", cwd=project).stdout)


@pytest.mark.parametrize("damage", ["swapped", "truncated", "deleted"])
def test_a_damaged_score_shard_is_named_and_rescored_alone(scored, tmp_path, damage):
    project = copy_of(scored, tmp_path)
    before = integrated(project)
    first, second, third = shard_files(project, "a")
    untouched = {path: path.read_bytes() for path in (second, third)}
    if damage == "swapped":  # two valid shards of one set, each where the other belongs
        data = first.read_bytes()
        first.write_bytes(second.read_bytes())
        second.write_bytes(data)
        untouched = {third: third.read_bytes()}
    elif damage == "truncated":
        first.write_bytes(first.read_bytes()[:200])
    else:
        first.unlink()
    refused = run_kiwb("integrate", project, cwd=project, check=False)
    message = assert_refused(refused, str(first), "the scores of teacher 'a' on the unlabeled "
                             "data, rows 1-16 is damaged", "kiwb score")
    assert "Resume with" not in refused.stdout + refused.stderr
    if damage == "swapped":
        assert "it holds rows 17-32 where rows 1-16 belong" in message or "content" in message
    # kiwb score names what it sets aside and scores only that again
    again = run_kiwb("score", project, cwd=project)
    said = " ".join((again.stdout + again.stderr).split())
    assert "is damaged" in said and "scoring it again" in said
    assert "All scores are up to date" not in said
    assert all(path.read_bytes() == data for path, data in untouched.items())
    after = integrated(project)
    assert after["wins"] == before["wins"] and after["conflicts"] == before["conflicts"]
    assert "up to date" in run_kiwb("score", project, cwd=project).stderr


def test_a_swapped_representation_shard_is_named_too(scored, tmp_path):
    project = copy_of(scored, tmp_path)
    first, second, _ = shard_files(project, "b", "unlabeled (representation)")
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)
    refused = run_kiwb("integrate", project, "--routing", "mahalanobis", cwd=project, check=False)
    assert_refused(refused, str(first), "the representations of teacher 'b'", "is damaged")


def test_shards_written_before_kiwb_recorded_hashes_are_checked_by_their_rows(scored, tmp_path):
    """A store from before version 8: no hash to compare, so the rows each shard holds tell a
    swap; kiwb score records the hashes of those that pass."""
    project = copy_of(scored, tmp_path)
    with sqlite3.connect(project / "store.sqlite") as db:
        db.execute("UPDATE score_shards SET row_start = NULL, bytes = NULL, sha256 = NULL")
    first, second, _ = shard_files(project, "a")
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)
    assert_refused(run_kiwb("integrate", project, cwd=project, check=False),
                   "it holds rows 17-32 where rows 1-16 belong")
    run_kiwb("score", project, cwd=project)
    with sqlite3.connect(project / "store.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM score_shards WHERE sha256 IS NULL "
                          "AND status = 'done'").fetchone()[0] == 0
    integrated(project)


@pytest.mark.slow
def test_a_damaged_checkpoint_is_named_and_a_resume_passes_over_it(scored, tmp_path, student_base):
    from conftest import TRAINING_SETTINGS

    project = copy_of(scored, tmp_path)
    config = project / "kiwb.toml"
    config.write_text(config.read_text() + f'{TRAINING_SETTINGS}student = "{student_base}"\n'
                      .replace("epochs = 8.0", "epochs = 2.0").replace("eval_every = 20",
                                                                       "eval_every = 3"))
    run_kiwb("train", project, "--min-steps", "0", "--foreground", cwd=project)
    checkpoints = sorted((project / "runs" / "muki-hard" / "checkpoints").glob("step-*"))
    newest = checkpoints[-1]
    assert (newest / "checksums.json").is_file()
    weights = newest / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    refused = run_kiwb("export", project, "--run", "muki-hard", "--checkpoint", "last",
                       "--to", tmp_path / "student", cwd=project, check=False)
    assert_refused(refused, str(newest), "this checkpoint is damaged", "model.safetensors")
    assert not (tmp_path / "student").exists()
    resumed = run_kiwb("train", project, "--resume", "--foreground", cwd=project)
    said = " ".join((resumed.stdout + resumed.stderr).split())
    assert f"{newest}: damaged" in said and "resuming from the checkpoint before it" in said
    assert (newest.parent / f"damaged-{newest.name}").is_dir()
    run_kiwb("export", project, "--run", "muki-hard", "--checkpoint", "last", "--to",
             tmp_path / "student", cwd=project)
