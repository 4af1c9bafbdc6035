"""Training data-parallel on two CPU ranks (gloo) with tiny real models: the same global batch
gives the weights one process gets (a dropout-free student, so the only difference left is
the order sums are taken in); evaluation and checkpoints run on rank 0; a run whose rank 0 is
killed resumes on two ranks to the weights of a run never killed; a killed rank leaves the
job lost with its log tail, also when rank 0 waits for it in a collective; a hung rank ends
the job after [training] rank_timeout_s."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_helpers import ended_job, kiwb_env, rank_pid, run_kiwb, wait_until, wait_until_waiting

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers import checkpoints as ckpt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(scored_project, tmp_path_factory) -> Path:
    """The scored project with a dropout-free student base and a short schedule."""
    from tiny import tiny_bert_config, wordpiece_tokenizer
    from transformers import BertForSequenceClassification

    root = tmp_path_factory.mktemp("ddp")
    base = root / "base"
    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(base)
    BertForSequenceClassification(tiny_bert_config(
        ("x", "y"), len(tokenizer), hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)).save_pretrained(base)
    tokenizer.save_pretrained(base)
    folder = root / "proj"
    shutil.copytree(scored_project, folder, ignore=shutil.ignore_patterns("runs", "exports", "logs"))
    config = folder / "kiwb.toml"
    text = config.read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("student = "))
    config.write_text(text.replace("[training]", f'[training]\nstudent = "{base}"') + "\n")
    return folder


@pytest.fixture(scope="module")
def one_process_run(project, tmp_path_factory) -> str:
    """Two epochs (20 steps, evaluated at 20) in one process: what the ranks must match."""
    run_kiwb("train", project, "--run", "one", "--epochs", "2", "--device", "cpu", "--foreground",
             cwd=tmp_path_factory.mktemp("one"))  # on the ranks' device, also on a GPU box
    return "one"


def weights(project: Path, run: str, step: int | None = None) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    run_dir = ProjectPaths(project).run_dir(run)
    found = ckpt.list_checkpoints(run_dir)
    folder = found[-1] if step is None else next(f for f in found if f.name == ckpt.step_name(step))
    return load_file(folder / "model.safetensors")


def assert_close(mine: dict, theirs: dict) -> None:
    """Equal up to float summation order (which Adam's normalised steps carry along): within
    1e-4 of weights that training moved by far more (checked in the first test)."""
    assert mine.keys() == theirs.keys()
    worst = max(float((mine[name] - theirs[name]).abs().max()) for name in theirs)
    assert worst < 1e-4, f"largest weight difference {worst}"


def test_two_ranks_with_the_same_global_batch_train_the_weights_one_process_does(
        project, one_process_run, tmp_path):
    done = run_kiwb("train", project, "--run", "two", "--epochs", "2", "--devices", "cpu,cpu",
                    cwd=tmp_path)
    said = done.stdout + done.stderr
    assert "on 2 ranks (cpu, cpu)" in " ".join(said.split()) and "Done" in said
    assert_close(weights(project, "two"), weights(project, one_process_run))
    from safetensors.torch import load_file

    base = load_file(Path(project.parent / "base" / "model.safetensors"))
    trained = weights(project, one_process_run)
    moved = max(float((trained[name] - base[name]).abs().max())
                for name in base if name in trained and trained[name].shape == base[name].shape)
    assert moved > 0.05  # training moved the weights far beyond the tolerance above
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
        evals = store.connection.execute(
            "SELECT COUNT(*) FROM events WHERE job_id = ? AND kind = 'train.eval'",
            (job.id,)).fetchone()[0]
    assert job.status == "finished" and job.settings["devices"] == "cpu,cpu"
    ranks = job.progress["ranks"]  # each rank's share of the 20 batches of 16 texts
    assert [(rank["rank"], rank["texts"]) for rank in ranks] == [(0, 160), (1, 160)]
    assert evals == 1  # rank 0 alone evaluated, at step 20
    rank_log = ProjectPaths(project).logs / f"job-{job.id}.rank-1.log"
    assert "rank 1: done at step 20" in rank_log.read_text()


def test_a_run_whose_rank_0_was_killed_resumes_to_the_weights_of_one_never_killed(
        project, tmp_path):
    run_kiwb("train", project, "--run", "whole", "--epochs", "6", "--devices", "cpu,cpu",
             cwd=tmp_path)
    run_kiwb("train", project, "--run", "cut", "--epochs", "6", "--devices", "cpu,cpu", "--detach",
             cwd=tmp_path)
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
    run_dir = ProjectPaths(project).run_dir("cut")
    wait_until(lambda: ckpt.list_checkpoints(run_dir), timeout=180, what="a checkpoint",
               every=0.05)
    with Store(ProjectPaths(project).store) as store:
        pid = store.jobs.get(job.id).pid
    os.kill(pid, signal.SIGKILL)  # rank 0, the job's worker, between checkpoints
    assert ended_job(project, job.id, timeout=60).status == "lost"
    resumed = run_kiwb("train", project, "--run", "cut", "--epochs", "6", "--devices", "cpu,cpu",
                       "--resume", cwd=tmp_path)
    assert "steps to go" in resumed.stdout + resumed.stderr
    cut, whole = weights(project, "cut", 60), weights(project, "whole", 60)
    assert all(torch.equal(cut[name], whole[name]) for name in whole)  # as if never killed


def test_a_killed_rank_leaves_the_training_job_lost_with_its_log(project, tmp_path):
    run_kiwb("train", project, "--run", "victim", "--epochs", "40", "--devices", "cpu,cpu",
             "--detach", cwd=tmp_path)
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
    rank_log = ProjectPaths(project).logs / f"job-{job.id}.rank-1.log"
    wait_until(lambda: rank_log.exists() and "steps" in rank_log.read_text(), timeout=120,
               what="rank 1's first steps")
    os.kill(rank_pid(rank_log), signal.SIGKILL)
    state = ended_job(project, job.id)
    assert state.status == "lost" and "rank 1 (cpu) died (killed by SIGKILL)" in state.error
    assert any("rank 1 of 2" in line for line in state.log_tail)


def test_torchrun_trains_under_one_job(project, one_process_run, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         # "--": torchrun's own parser would take --run for its --run-path
         "-m", "kiwb", "--", "train", str(project), "--run", "torchrun", "--epochs", "2"],
        cwd=tmp_path, env=kiwb_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    with Store(ProjectPaths(project).store) as store:
        jobs = [job for job in store.jobs.all() if job.run == "torchrun"]
    assert len(jobs) == 1 and jobs[0].status == "finished"
    assert_close(weights(project, "torchrun"), weights(project, one_process_run))


def start_two_ranks(project: Path, run: str, tmp_path: Path) -> tuple[int, Path]:
    """A long run on two CPU ranks, detached, once rank 1 steps: its job id and rank 1's log."""
    run_kiwb("train", project, "--run", run, "--epochs", "40", "--devices", "cpu,cpu",
             "--detach", cwd=tmp_path)
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
    rank_log = ProjectPaths(project).logs / f"job-{job.id}.rank-1.log"
    wait_until(lambda: rank_log.exists() and "steps" in rank_log.read_text(), timeout=120,
               what="rank 1's first steps")
    return job.id, rank_log


def test_a_rank_killed_while_rank_0_waits_in_a_collective_ends_the_job_lost_within_a_minute(
        project, tmp_path):
    """Issue 30, point 1: rank 1 is stopped first, so rank 0 surely waits for its gradients
    when it dies; rank 0's watch (and, on gloo, the closed connection) ends the job."""
    job_id, rank_log = start_two_ranks(project, "waiting", tmp_path)
    pid = rank_pid(rank_log)
    os.kill(pid, signal.SIGSTOP)
    with Store(ProjectPaths(project).store) as store:
        rank_0 = store.jobs.get(job_id).pid  # the job's own process is rank 0
    wait_until_waiting(rank_0, timeout=60, what="rank 0 to wait for rank 1 in a collective")
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    state = ended_job(project, job_id, timeout=60)
    assert time.monotonic() - killed < 60
    assert state.status == "lost" and "rank 1 (cpu) died (killed by SIGKILL)" in state.error
    assert any("rank 1 of 2" in line for line in state.log_tail)


def test_a_hung_rank_ends_the_job_lost_after_the_ranks_timeout(project, tmp_path):
    """A rank that stops answering without dying (as a wedged GPU does): its peers' gradient
    average gives up after [training] rank_timeout_s, not NCCL's 30 minutes."""
    folder = tmp_path / "proj"
    shutil.copytree(project, folder, ignore=shutil.ignore_patterns("runs", "exports", "logs"))
    config = folder / "kiwb.toml"
    config.write_text(config.read_text().replace("[training]", "[training]\nrank_timeout_s = 5"))
    job_id, rank_log = start_two_ranks(folder, "hung", tmp_path)
    pid = rank_pid(rank_log)
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        state = ended_job(folder, job_id, timeout=60)
    finally:  # lost_outcome killed it; a failed test must not leave it stopped
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # in whichever collective rank 0 waited (the gradients' average, the loss, the next step)
    assert state.status == "lost" and state.error.startswith("a rank stopped answering (")
    assert "timed out" in state.error.lower()
    assert time.monotonic() - stopped < 40
