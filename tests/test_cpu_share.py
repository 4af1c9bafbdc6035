"""Jobs sharing a machine divide its cores: the registry of running jobs, with real processes
standing in for the other jobs (started, then killed), and a real scoring job that logs it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest
from cli_helpers import kiwb_env, run_kiwb

from kiwb.project.processes import process_start
from kiwb.workers.cpu_share import CpuShare, machine_cores


def other_job(folder):
    """A real process registered as a running kiwb job, as CpuShare.join writes it."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{socket.gethostname()}-{process.pid}.json").write_text(json.dumps(
        {"pid": process.pid, "start": process_start(process.pid), "job": "other"}))
    return process


@pytest.fixture
def no_omp(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def test_each_job_takes_its_share_and_takes_the_cores_back_when_the_other_ends(tmp_path, no_omp):
    folder = tmp_path / "running"
    threads = []
    share = CpuShare("job 1", folder=folder, cores=4, set_threads=threads.append)
    assert share.join() is None  # alone: every core, and nothing to say in its log
    others = [other_job(folder), other_job(folder)]
    try:
        assert share.rebalance() is None  # looked a moment ago: not again before LOOK_EVERY_S
        assert share.rebalance(force=True) == (
            "CPU threads: 1 of 4 cores, shared with 2 other kiwb processes on this machine "
            "(jobs, or ranks of one)")
        others[0].kill()
        others[0].wait()
        assert share.rebalance(force=True) == (
            "CPU threads: 2 of 4 cores, shared with 1 other kiwb process on this machine "
            "(jobs, or ranks of one)")
        assert not (folder / f"{socket.gethostname()}-{others[0].pid}.json").exists()  # cleared
    finally:
        others[1].kill()
        others[1].wait()
    assert share.rebalance(force=True).startswith("CPU threads: 4 of 4 cores")
    assert threads == [4, 1, 2, 4]
    share.leave()
    assert list(folder.iterdir()) == []  # its own entry gone, the killed jobs' cleared


def test_three_jobs_on_two_cores_still_get_a_thread_each(tmp_path, no_omp):
    folder = tmp_path / "running"
    others = [other_job(folder) for _ in range(2)]
    try:
        share = CpuShare("job 1", folder=folder, cores=2, set_threads=lambda n: None)
        assert share.join().startswith("CPU threads: 1 of 2 cores, shared with 2 other")
    finally:
        for process in others:
            process.kill()
            process.wait()


def test_a_users_omp_num_threads_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    share = CpuShare("job 1", folder=tmp_path / "running", set_threads=pytest.fail)
    assert share.join() is None and share.rebalance(force=True) is None
    assert not (tmp_path / "running").exists()  # not registered: it takes no share


@pytest.mark.slow
def test_a_scoring_job_beside_another_says_it_shares_the_cores(scored_project, tmp_path):
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project, ignore=shutil.ignore_patterns("runs", "exports"))
    config = project / "kiwb.toml"  # new scoring settings, so the job really scores
    config.write_text(config.read_text().replace("mc_passes = 4", "mc_passes = 5"))
    folder = tmp_path / "running"
    other = other_job(folder)
    env = {key: value for key, value in kiwb_env().items()
           if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["KIWB_CPU_SHARE_DIR"] = str(folder)
    try:
        done = subprocess.run([sys.executable, "-m", "kiwb", "score", str(project), "--foreground"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    finally:
        other.kill()
        other.wait()
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-2000:]
    cores = machine_cores()
    assert (f"CPU threads: {max(1, cores // 2)} of {cores} cores, shared with 1 other kiwb "
            "process on this machine") in said
    assert [entry.name for entry in folder.iterdir()] == [
        f"{socket.gethostname()}-{other.pid}.json"]  # it left; the other's entry stays
    run_kiwb("integrate", project, cwd=tmp_path)  # the scores it wrote are whole
