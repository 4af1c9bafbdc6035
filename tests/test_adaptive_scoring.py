"""`mc_passes = "auto"` end to end on tiny real teachers: fewer passes than the maximum, only
undecided texts sampled again, the same arrays from a fresh run and from one killed midway,
and scores that integration reads like any others."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import kiwb_env, run_kiwb, wait_until

from kiwb.project.paths import ProjectPaths
from kiwb.project.shards import SCORES_ONLY
from kiwb.project.store import Store

# Each module of kiwb runs in the README's test command (`-m "not slow"`): one test here
# stays out of the slow mark for that; the others run in CI.

AUTO = 'mc_passes = "auto"\nmax_mc_passes = 12\nshard_size = 16'


def auto_copy(scored_project: Path, folder: Path) -> Path:
    shutil.copytree(scored_project, folder, ignore=shutil.ignore_patterns(
        "runs", "exports", "scores", "store.sqlite*", "logs"))
    config = folder / "kiwb.toml"
    text = config.read_text()
    assert "mc_passes = 4\nshard_size = 16" in text
    config.write_text(text.replace("mc_passes = 4\nshard_size = 16", AUTO))
    return folder


def final_arrays(project: Path) -> dict:
    found = {}
    with Store(ProjectPaths(project).store) as store:
        rows = store.connection.execute(
            "SELECT s.dataset, s.teacher, h.shard, h.score_key FROM score_shards h JOIN "
            f"score_sets s ON s.key = h.score_key WHERE h.status = 'done' AND s.{SCORES_ONLY}"
        ).fetchall()
    for dataset, teacher, shard, key in rows:
        with np.load(ProjectPaths(project).shard_file(key, shard)) as data:
            found[(dataset, teacher, shard)] = {name: data[name] for name in data.files}
    return found


def test_auto_passes_sample_only_undecided_texts_and_reproduce_exactly(scored_project, tmp_path):
    project = auto_copy(scored_project, tmp_path / "proj")
    said = run_kiwb("score", project, cwd=tmp_path)
    output = " ".join((said.stdout + said.stderr).split())
    assert "K = auto: 4 MC-dropout passes each" in output and "still undecided" in output
    arrays = final_arrays(project)
    assert len(arrays) == 2 * (10 + 3)  # every shard of both teachers, pool and eval
    passes = {key: value["mc_passes"] for key, value in arrays.items()}
    used = np.concatenate(list(passes.values()))
    assert set(np.unique(used)) <= {4, 8, 12} and (used == 4).any() and (used > 4).any()
    for (dataset, _teacher, shard), count in passes.items():  # both teachers sample a text alike
        other = next(value for (d, t, s), value in passes.items()
                     if (d, s) == (dataset, shard) and t != _teacher)
        assert np.array_equal(count, other)
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
    drawn, at_max = job.ending["passes_drawn"], job.ending["passes_at_max"]
    assert drawn == int(used.sum()) and at_max == 12 * 2 * 200 and drawn < at_max
    assert f"Drew {drawn:,} MC-dropout passes" in output

    again = auto_copy(scored_project, tmp_path / "again")  # a fresh run: the same arrays
    run_kiwb("score", again, cwd=tmp_path)
    repeated = final_arrays(again)
    assert repeated.keys() == arrays.keys()
    assert all(np.array_equal(repeated[key][name], arrays[key][name])
               for key in arrays for name in arrays[key])

    summary = run_kiwb("integrate", project, "--routing", "class-rank", cwd=tmp_path)  # no rescoring
    assert "routing accuracy on eval" in summary.stdout
    with Store(ProjectPaths(project).store) as store:
        assert [job.kind for job in store.jobs.all()] == ["score", "integrate"]


@pytest.mark.slow
def test_an_auto_scoring_job_killed_midway_resumes_to_the_same_arrays(scored_project, tmp_path):
    reference = auto_copy(scored_project, tmp_path / "reference")
    run_kiwb("score", reference, cwd=tmp_path)
    project = auto_copy(scored_project, tmp_path / "proj")
    env = kiwb_env()
    job = subprocess.Popen([sys.executable, "-m", "kiwb", "score", str(project), "--foreground"],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rounds = ProjectPaths(project).scores
    wait_until(lambda: any(path.name.startswith("round-1") for path in rounds.rglob("round-*.npz")),
               timeout=120, what="the second round", every=0.05)
    assert job.poll() is None  # killed in the middle of the rounds, not after them
    os.kill(job.pid, signal.SIGKILL)  # in the middle of the rounds
    job.wait()
    run_kiwb("score", project, cwd=tmp_path)
    mine, theirs = final_arrays(project), final_arrays(reference)
    assert mine.keys() == theirs.keys()
    assert all(np.array_equal(mine[key][name], theirs[key][name])
               for key in theirs for name in theirs[key])


@pytest.mark.slow
def test_auto_passes_on_several_devices_are_refused_in_one_line(scored_project, tmp_path):
    project = auto_copy(scored_project, tmp_path / "proj")
    refused = run_kiwb("score", project, "--devices", "cpu,cpu", "--foreground", cwd=tmp_path,
                       check=False)
    assert refused.returncode == 2
    assert 'mc_passes = "auto" scores on one device' in refused.stderr
