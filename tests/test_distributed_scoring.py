"""Scoring on several ranks, on CPU with gloo and tiny real teachers: `--devices cpu,cpu`
(kiwb starts the ranks) and torchrun (torchrun starts them) store the very arrays one process
stores, under one job record with per-rank progress; a rank killed midway leaves the job lost
with that rank's log tail, and scoring again finishes it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_helpers import ended_job, kiwb_env, rank_pid, run_kiwb, wait_until

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store

# Each module of kiwb runs in the README's test command (`-m "not slow"`): one test here
# stays out of the slow mark for that; the others run in CI.


def fresh_copy(scored_project: Path, folder: Path) -> Path:
    """The scored project's config and data, with none of its scores."""
    shutil.copytree(scored_project, folder, ignore=shutil.ignore_patterns(
        "runs", "exports", "scores", "store.sqlite*", "logs"))
    return folder


def stored_arrays(project: Path) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """Every done shard's arrays, by (score key, shard)."""
    found = {}
    with Store(ProjectPaths(project).store) as store:
        rows = store.connection.execute(
            "SELECT score_key, shard FROM score_shards WHERE status = 'done'").fetchall()
    for key, shard in rows:
        with np.load(ProjectPaths(project).shard_file(key, shard)) as data:
            found[(key, shard)] = {name: data[name] for name in data.files}
    return found


def cpu_scored(scored_project: Path, tmp_path: Path) -> Path:
    """The shared project's scores as one process on the CPU gives them: the project itself
    where it was scored on the CPU, else (on a GPU box) a copy scored again on the CPU."""
    if not torch.cuda.is_available():
        return scored_project
    reference = fresh_copy(scored_project, tmp_path / "cpu-reference")
    run_kiwb("score", reference, "--device", "cpu", cwd=tmp_path)
    return reference


def assert_same_scores(project: Path, reference: Path) -> None:
    mine, theirs = stored_arrays(project), stored_arrays(reference)
    # 2 teachers x (10 + 3) shards of MC scores, and as many of their representations, kept
    # from each shard's dropout-off forward by whichever rank scored it
    assert mine.keys() == theirs.keys() and len(mine) == 2 * 26
    for place, arrays in theirs.items():
        for name, values in arrays.items():
            assert np.array_equal(mine[place][name], values), (place, name)


def jobs_of(project: Path):
    with Store(ProjectPaths(project).store) as store:
        return store.jobs.all()


def test_two_cpu_ranks_store_what_one_process_stores(scored_project, tmp_path):
    project = fresh_copy(scored_project, tmp_path / "proj")
    done = run_kiwb("score", project, "--devices", "cpu,cpu", cwd=tmp_path)
    said = done.stdout + done.stderr
    assert "on 2 ranks (cpu, cpu)" in said and "Done." in said
    assert_same_scores(project, cpu_scored(scored_project, tmp_path))
    [job] = jobs_of(project)  # one record for the whole distributed job
    assert job.status == "finished" and job.settings["devices"] == "cpu,cpu"
    ranks = job.progress["ranks"]
    assert [rank["rank"] for rank in ranks] == [0, 1] and all(r["texts"] > 0 for r in ranks)
    assert sum(rank["texts"] for rank in ranks) == 2 * 200  # every text, by each teacher
    rank_log = ProjectPaths(project).logs / f"job-{job.id}.rank-1.log"
    assert "rank 1: done" in rank_log.read_text()
    listed = " ".join(run_kiwb("jobs", project, cwd=tmp_path).stdout.split())
    assert f"job {job.id} on 2 ranks" in listed and "rank 1 cpu on" in listed


@pytest.mark.slow
def test_torchrun_ranks_store_what_one_process_stores_under_one_job(scored_project, tmp_path):
    project = fresh_copy(scored_project, tmp_path / "proj")
    env = kiwb_env()
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "kiwb", "score", str(project)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert_same_scores(project, scored_project)
    [job] = jobs_of(project)
    assert job.status == "finished" and len(job.progress["ranks"]) == 2


@pytest.mark.slow
def test_a_killed_rank_leaves_the_job_lost_with_its_log_and_scoring_again_finishes(
        scored_project, tmp_path):
    project = fresh_copy(scored_project, tmp_path / "proj")
    config = project / "kiwb.toml"  # more passes: the job lasts long enough to kill a rank
    config.write_text(config.read_text().replace("mc_passes = 4", "mc_passes = 4\nbatch_size = 2"))
    run_kiwb("score", project, "--devices", "cpu,cpu", "--detach", cwd=tmp_path)
    [job] = jobs_of(project)
    rank_log = ProjectPaths(project).logs / f"job-{job.id}.rank-1.log"
    wait_until(lambda: rank_log.exists() and "scored" in rank_log.read_text(), timeout=120,
               what="rank 1's first shard")
    os.kill(rank_pid(rank_log), signal.SIGKILL)
    state = ended_job(project, job.id)
    assert state.status == "lost"
    assert "rank 1 (cpu) died (killed by SIGKILL)" in state.error
    assert any("scored" in line for line in state.log_tail)  # rank 1's own log
    listed = " ".join(run_kiwb("jobs", project, cwd=tmp_path).stdout.split())
    assert "lost" in listed and "rank 1 (cpu) died" in listed
    run_kiwb("score", project, "--device", "cpu", cwd=tmp_path)  # one process finishes the rest
    reference = fresh_copy(scored_project, tmp_path / "reference")
    (reference / "kiwb.toml").write_text(config.read_text())
    run_kiwb("score", reference, "--device", "cpu", cwd=tmp_path)  # the ranks' device, GPU or not
    mine, theirs = stored_arrays(project), stored_arrays(reference)
    assert mine.keys() == theirs.keys()
    assert all(np.array_equal(mine[place][name], theirs[place][name])
               for place in theirs for name in theirs[place])


@pytest.mark.slow
def test_bad_devices_are_refused_in_one_line(scored_project, tmp_path):
    project = fresh_copy(scored_project, tmp_path / "proj")
    bad = [("cpu,,all", "give a comma list of devices")]
    if not torch.cuda.is_available():  # on a GPU box, all is every GPU
        bad.append(("all", "--devices all: no CUDA device here"))
    for devices, fragment in bad:
        refused = run_kiwb("score", project, "--devices", devices, "--foreground", cwd=tmp_path,
                           check=False)
        assert refused.returncode == 2 and fragment in refused.stderr, refused.stderr
    with Store(ProjectPaths(project).store) as store:
        assert not store.connection.execute("SELECT COUNT(*) FROM score_shards").fetchone()[0]


@pytest.mark.slow
def test_one_gpu_named_twice_is_refused_before_any_job_is_recorded(scored_project, tmp_path):
    """Issue 30, point 3: two ranks on cuda:0 once failed inside NCCL (training) or shared
    the GPU quietly (scoring)."""
    project = fresh_copy(scored_project, tmp_path / "proj")
    with Store(ProjectPaths(project).store) as store:
        jobs = len(store.jobs.all())
    for command in ("score", "train"):
        refused = run_kiwb(command, project, "--devices", "cuda,cuda:0", "--foreground",
                           cwd=tmp_path, check=False)
        assert refused.returncode == 2, refused.stderr
        assert "--devices 'cuda,cuda:0': cuda:0 is named twice" in refused.stderr
    with Store(ProjectPaths(project).store) as store:
        assert len(store.jobs.all()) == jobs
