"""Background jobs end to end: real detached workers on tiny real models, killed, hung up on,
refused, cancelled and resumed, with the store as the only witness."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_helpers import Deadline, kiwb_env, run_kiwb, wait_until, write_project
from tiny import TEACHER_A_LABELS, TEACHER_B_LABELS, build_teacher, make_texts, write_jsonl

from kiwb.launch import launch_job
from kiwb.project.job_specs import ScoreSpec, TrainSpec
from kiwb.project.jobs import JobState
from kiwb.project.paths import ProjectPaths
from kiwb.project.processes import pid_alive
from kiwb.project.shards import SCORES_ONLY
from kiwb.project.store import Store
from kiwb.workers.checkpoints import list_checkpoints, step_name
from kiwb.workers.job import Outcome


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """Untrained tiny teachers: what they predict does not matter here, only that they run.
    Teacher a doubles as the student base (a BERT classifier whose head training replaces)."""
    root = tmp_path_factory.mktemp("job_models")
    build_teacher(root / "a", "bert", TEACHER_A_LABELS, trained=False, seed=1)
    build_teacher(root / "b", "roberta", TEACHER_B_LABELS, trained=False, seed=2)
    return root


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Workers inherit this process's environment: keep them offline and quiet."""
    for name, value in kiwb_env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture(autouse=True)
def no_stray_workers(tmp_path):
    """Detached workers outlive a failed test by design; end those this test started."""
    yield
    for store_path in tmp_path.rglob("store.sqlite"):
        for state in jobs(store_path.parent):
            if state.live and state.pid and pid_alive(state.pid):
                os.kill(state.pid, signal.SIGKILL)


def make_project(root: Path, models: Path, texts: int, extra: str = "") -> Path:
    data = write_jsonl(root.parent / f"{root.name}.jsonl", make_texts(texts, seed=5))
    project = write_project(root, {"a": models / "a", "b": models / "b"}, data,
                            scoring='mc_passes = 4\nshard_size = 4\nbatch_size = 4\ndevice = "cpu"\n',
                            extra=extra)
    config = project / "kiwb.toml"  # gold labels, so the supervised student needs no scores
    config.write_text(config.read_text().replace(f'path = "{data}"', f'path = "{data}"\nlabel_column = "label"'))
    return project


def job(root: Path, job_id: int) -> JobState:
    with Store(ProjectPaths(root).store) as store:
        return store.jobs.get(job_id)


def jobs(root: Path) -> list[JobState]:
    if not ProjectPaths(root).store.exists():
        return []
    with Store(ProjectPaths(root).store) as store:
        return store.jobs.all()


def wait_for(condition, what: str, timeout: float = 90.0):
    """cli_helpers.wait_until with these tests' timeout and a finer poll."""
    return wait_until(condition, timeout=timeout, what=what, every=0.05)


def done_shards(root: Path) -> int:
    """Finished shards of the MC score sets."""
    with Store(ProjectPaths(root).store) as store:
        return store.connection.execute(
            "SELECT COUNT(*) FROM score_shards JOIN score_sets ON key = score_key "
            f"WHERE status='done' AND {SCORES_ONLY}").fetchone()[0]


def killed_once_a_shard_is_recorded(root: Path, job_id: int) -> int:
    """SIGKILL job `job_id`'s worker as soon as the store holds a finished shard of it, with the
    store's write lock held from that reading to the worker's death, so the worker records
    nothing in between: the count returned is what the kill left (a worker blocked on the lock
    dies waiting, its shard's file maybe written, its row not)."""
    import sqlite3

    wait_for(lambda: ProjectPaths(root).store.exists(), "the job's store")
    pid = wait_for(lambda: job(root, job_id).pid, "the worker's pid")
    db = sqlite3.connect(ProjectPaths(root).store, timeout=30, isolation_level=None)
    try:
        def locked_count() -> int:
            db.execute("BEGIN IMMEDIATE")  # the worker's next write now waits for this one
            found = db.execute("SELECT COUNT(*) FROM score_shards JOIN score_sets ON key = "
                               f"score_key WHERE status='done' AND {SCORES_ONLY}").fetchone()[0]
            if not found:
                db.execute("ROLLBACK")
            return found

        recorded = wait_for(locked_count, "a finished shard")
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(pid), "the killed worker to be gone")
        db.execute("ROLLBACK")
    finally:
        db.close()
    return recorded


def assert_one_score_per_text(root: Path) -> None:
    paths = ProjectPaths(root)
    with Store(paths.store) as store:
        sets = store.connection.execute(
            f"SELECT key, num_texts, num_shards FROM score_sets WHERE {SCORES_ONLY}").fetchall()
        events = store.events_after(0, kind="score.shard")
    assert len(sets) == 2
    for key, num_texts, num_shards in sets:
        rows = np.concatenate([np.load(paths.shard_file(key, s))["rows"] for s in range(num_shards)])
        assert rows.tolist() == list(range(num_texts)), "each text scored exactly once"
    shards = [(e["data"]["key"], e["data"]["shard"]) for e in events]
    assert len(shards) == len(set(shards)), "no shard recorded twice"


@pytest.mark.slow
def test_killed_worker_shows_lost_and_a_relaunch_completes_it(tmp_path, models):
    root = make_project(tmp_path / "killed", models, texts=32)
    first = launch_job(root, ScoreSpec())
    recorded = killed_once_a_shard_is_recorded(root, first)
    assert 1 <= recorded < 16  # mid-way, as the store says: nothing was recorded after the kill
    assert done_shards(root) == recorded

    listed = json.loads(run_kiwb("jobs", root, "--json", cwd=tmp_path).stdout)
    lost = next(entry for entry in listed if entry["id"] == first)
    assert lost["status"] == "lost"
    assert any("Scoring" in line for line in lost["log_tail"])
    listing = run_kiwb("jobs", root, cwd=tmp_path).stdout
    assert f"job {first} lost" in listing
    assert "resume with: kiwb score" in listing

    second = launch_job(root, ScoreSpec())  # the dead worker's lock and shard claim block nothing
    wait_for(lambda: not job(root, second).live, "the relaunched job to end")
    assert job(root, second).status == "finished"
    assert job(root, first).status == "lost"
    assert_one_score_per_text(root)
    # The lost job's hint is stale now: the listing names the job that finished its work.
    listing = " ".join(run_kiwb("jobs", root, cwd=tmp_path).stdout.split())
    assert f"job {first} lost: taken over by job {second} (finished)" in listing
    assert "resume with" not in listing


@pytest.mark.slow
def test_a_hung_up_job_keeps_running_and_a_reader_sees_its_events_live(tmp_path, models):
    root = make_project(tmp_path / "hangup", models, texts=16)
    # A stand-in for an SSH login: its own session and process group, like a terminal's.
    shell = subprocess.Popen(
        ["bash", "-c", f"'{sys.executable}' -m kiwb score '{root}' --detach; sleep 30"],
        start_new_session=True, env=kiwb_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=_signals_as_a_login_has_them)
    try:
        job_id = wait_for(lambda: jobs(root) and jobs(root)[0].heartbeat_at and jobs(root)[0].id,
                          "the job's first heartbeat")
        hung_up_at = time.time()
        os.killpg(shell.pid, signal.SIGHUP)
        assert shell.wait(timeout=10) in (-signal.SIGHUP, 128 + signal.SIGHUP)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
    follower = subprocess.Popen([sys.executable, "-m", "kiwb", "logs", str(job_id), str(root), "-f"],
                                env=kiwb_env(), stdout=subprocess.PIPE, text=True)
    seen, lags, reading_since = [], [], time.time()
    with Store(ProjectPaths(root).store) as reader:
        while True:
            ended = not reader.jobs.get(job_id).live  # then one more read gets the rest
            now = time.time()
            for event in reader.events_after(seen[-1]["id"] if seen else 0):
                seen.append(event)
                lags.append(now - event["ts"])
            if ended:
                break
            time.sleep(0.05)
        everything = reader.events_after(0)
        ended = reader.jobs.get(job_id)
    assert ended.status == "finished"
    assert ended.heartbeat_at > hung_up_at, "it kept beating after the hangup"
    assert_one_score_per_text(root)

    ids = [event["id"] for event in seen]
    assert all(a < b for a, b in zip(ids, ids[1:], strict=False)), "in order"
    assert ids == [event["id"] for event in everything], "none missing"
    kinds = [event["kind"] for event in seen]
    assert kinds[:2] == ["job.queued", "job.started"] and kinds[-1] == "job.finished"
    assert kinds.count("score.shard") == 8 and "job.progress" in kinds
    live = [lag for event, lag in zip(seen, lags, strict=True) if event["ts"] > reading_since]
    assert sorted(live)[len(live) // 2] < 1.0, "seen within a second"
    log, _ = follower.communicate(timeout=30)  # `kiwb logs -f` ends with the job
    assert "Done." in log


def freeze_outside_a_write(pid: int, root: Path) -> None:
    """SIGSTOP a worker, but not inside a store write: frozen mid-transaction it would hold
    the store's lock, and every kiwb command after it would wait for a process that never
    goes on. Thaw and try again until the store is free."""
    import sqlite3

    for _ in range(100):
        os.kill(pid, signal.SIGSTOP)
        db = sqlite3.connect(ProjectPaths(root).store, timeout=0.2, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.02)
        finally:
            db.close()
    raise AssertionError(f"worker {pid} never let go of the store")


@pytest.mark.slow
def test_a_second_writer_of_the_same_run_is_refused(tmp_path, models):
    root = make_project(tmp_path / "twice", models, texts=600)  # ends killed, long before done
    first = launch_job(root, ScoreSpec())
    running = wait_for(lambda: job(root, first).status == "running" and job(root, first), "job start")
    message = (f"job {first} (score, pid {running.pid}) is already running this run; "
               f"cancel it with: kiwb cancel {first}")

    refused = run_kiwb("score", root, "--detach", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr.strip() == f"kiwb: error: {message}"
    second_worker = subprocess.run([sys.executable, "-m", "kiwb.workers", str(root), str(first)],
                                   env=kiwb_env(), capture_output=True, text=True, timeout=60)
    assert second_worker.returncode == 2 and message in second_worker.stderr
    assert job(root, first).status == "running"

    # A second cancel ends it at once: freeze it first, so the first cannot finish cleanly.
    freeze_outside_a_write(running.pid, root)
    assert "asked job" in run_kiwb("cancel", first, root, cwd=tmp_path).stdout
    assert "killed job" in run_kiwb("cancel", first, root, cwd=tmp_path).stdout
    cancelled = job(root, first)
    assert cancelled.status == "cancelled" and cancelled.ending == {"killed": True}
    assert not pid_alive(running.pid)


@pytest.mark.slow
def test_cancelled_training_stops_at_a_batch_boundary_and_resumes(tmp_path, models):
    training = (f'[training]\nstudent = "{models / "a"}"\nepochs = 3.0\nmin_steps = 0\nbatch_size = 4\n'
                "eval_every = 1000\nmax_length = 32\nlearning_rate = 0.003\n")
    root = make_project(tmp_path / "train", models, texts=40, extra=training)  # 30 steps
    job_id = launch_job(root, TrainSpec(run="sup", method="supervised"))
    with Store(ProjectPaths(root).store) as store:
        wait_for(lambda: store.events_after(0, job_id=job_id, kind="train.step"), "step 10")
    # Frozen while the cancel arrives, so it lands mid-run however fast this machine trains.
    worker = job(root, job_id).pid
    freeze_outside_a_write(worker, root)
    try:
        assert "asked job" in run_kiwb("cancel", job_id, root, cwd=tmp_path).stdout
    finally:
        os.kill(worker, signal.SIGCONT)
    stopped = wait_for(lambda: None if job(root, job_id).live else job(root, job_id), "the stop")
    assert stopped.status == "cancelled"
    step = stopped.ending["step"]
    assert 10 <= step < 30, "stopped between batches, before the end"
    run_dir = ProjectPaths(root).run_dir("sup")
    assert list_checkpoints(run_dir)[-1].name == step_name(step)  # checkpointed where it stopped
    assert "Resume with: kiwb train" in Path(stopped.log_path).read_text()

    resumed = run_kiwb("train", root, "--run", "sup", "--method", "supervised", "--resume",
                       cwd=tmp_path)
    assert f"{30 - step:,} of 30 steps to go" in resumed.stderr
    assert list_checkpoints(run_dir)[-1].name == step_name(30)
    # Without --detach the CLI starts a background worker too, and follows it to its end.
    followed = json.loads(run_kiwb("jobs", root, "--json", cwd=tmp_path).stdout)[-1]
    assert (followed["kind"], followed["run"], followed["status"]) == ("train", "sup", "finished")
    assert followed["log_path"].endswith(f"job-{followed['id']}.log") and followed["pid"] != stopped.pid


def test_the_cancel_signal_after_the_heartbeat_saw_the_request_is_still_the_first(tmp_path):
    # The race CI hit: a frozen worker resumes, its heartbeat thread reads the cancel request
    # from the store before the pending SIGTERM's handler runs. That SIGTERM is still the
    # first cancel (stop at a batch boundary), not the second (stop at once).
    from kiwb.workers.job import JobSession

    with Store(tmp_path / "kiwb.sqlite") as store:
        session = JobSession(store, store.jobs.get(store.jobs.create("train", "r", {})), "p")
        session.begin()
        try:
            store.jobs.request_cancel(session.job.id, by="kiwb cancel")
            session._beat(store)  # what the heartbeat thread does once a second
            assert session.should_stop()
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # handled here, before kill returns
            except KeyboardInterrupt:
                pytest.fail("the first cancel's SIGTERM was taken for a second one")
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM: at once
        finally:
            session.finish(Outcome("cancelled", {}))
    assert signal.getsignal(signal.SIGTERM) is not session._on_sigterm


def _signals_as_a_login_has_them() -> None:
    """SIGINT and SIGHUP at their defaults, as in an SSH login. A test run started in the
    background (`nohup`, or `&` in a script) passes them on ignored, and an ignored signal
    stays ignored in every child: the Ctrl-C and hang-up these tests send would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _in_a_terminal(*args: str) -> tuple[subprocess.Popen, int]:
    """`python -m kiwb ARGS` on a pseudo-terminal, in a session of its own: an SSH login."""
    import pty

    terminal, its_side = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "kiwb", *args], stdin=its_side, stdout=its_side,
                               stderr=its_side, start_new_session=True,
                               preexec_fn=_signals_as_a_login_has_them,
                               env={**kiwb_env(), "TERM": "xterm-256color"})
    os.close(its_side)
    return process, terminal


def _read_until(terminal: int, done, timeout: float = 90.0) -> str:
    """What the terminal shows until `done(text)` holds (or the program closes it)."""
    import select

    text, deadline = "", Deadline(timeout, "the terminal's text")
    while not done(text) and not deadline.expired:
        if select.select([terminal], [], [], 0.1)[0]:
            try:
                text += os.read(terminal, 65536).decode("utf-8", errors="replace")
            except OSError:  # the program exited and closed its side
                break
    return text


@pytest.mark.slow
@pytest.mark.parametrize("signal_sent", [signal.SIGINT, signal.SIGHUP])
def test_a_job_followed_from_a_terminal_outlives_it(tmp_path, models, signal_sent):
    # `kiwb score` without --detach starts a background worker and shows its progress bar;
    # Ctrl-C (SIGINT) stops following, a lost connection (SIGHUP to the login's group) ends
    # the follower: either way the job goes on to the end.
    # texts enough that the job is still scoring when the signal lands: with 48, once in a
    # full run it had ended first, and the follower was exiting (a late Ctrl-C: status -2)
    root = make_project(tmp_path / "followed", models, texts=240)
    follower, terminal = _in_a_terminal("score", str(root))
    try:
        shown = _read_until(terminal, lambda text: "pairs/s" in text and "ETA" in text)
        assert "runs in the background" in shown and "━" in shown, shown  # a bar, not log lines
        job_id = jobs(root)[0].id
        assert job(root, job_id).status in ("running", "finished")  # a fast machine may be done
        if signal_sent == signal.SIGINT:
            os.kill(follower.pid, signal.SIGINT)  # what Ctrl-C sends the foreground program
        else:
            os.killpg(follower.pid, signal.SIGHUP)
        shown += _read_until(terminal, lambda text: follower.poll() is not None, timeout=30)
        code = follower.wait(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
        os.close(terminal)
    if signal_sent == signal.SIGINT:
        assert code == 130 and f"Stopped following job {job_id}; it keeps running" in shown
        assert f"kiwb cancel {job_id}" in shown
    else:
        assert code in (-signal.SIGHUP, 128 + signal.SIGHUP)
    # On a fast machine the job may have finished already: what matters is that the signal
    # never reached it, so it ends "finished" (a worker killed with its follower would read
    # "lost" or "cancelled").
    ended = wait_for(lambda: None if job(root, job_id).live else job(root, job_id), "the job's end")
    assert ended.status == "finished", "the job runs on after its follower is gone"
    assert_one_score_per_text(root)


@pytest.mark.slow
def test_a_followed_job_exits_as_its_worker_does(tmp_path, models):
    # The follower returns the worker's exit status, so scripts can rely on `kiwb score`.
    root = make_project(tmp_path / "status", models, texts=8)
    finished = run_kiwb("score", root, cwd=tmp_path)
    assert "Done. Next: kiwb integrate" in finished.stderr
    assert "kiwb job " not in finished.stderr  # the worker's pid line stays in its log
    (ProjectPaths(root).root / "kiwb.toml").write_text(
        (root / "kiwb.toml").read_text().replace(str(models / "b"), str(tmp_path)))
    refused = run_kiwb("score", root, cwd=tmp_path, check=False)  # a folder that is no checkpoint
    assert refused.returncode == 2
    assert refused.stderr.count("kiwb: error:") == 1 and "no config.json" in refused.stderr
    assert [state.status for state in jobs(root)] == ["finished", "failed"]


def test_a_gpu_that_is_not_here_is_refused_in_one_line(tmp_path, models):
    root = make_project(tmp_path / "nogpu", models, texts=8)
    refused = run_kiwb("score", root, "--device", "cuda:9", cwd=tmp_path, check=False)
    assert refused.returncode == 2
    if torch.cuda.is_available():  # a GPU box: a GPU index it lacks
        gpus = ", ".join(f"cuda:{index}" for index in range(torch.cuda.device_count()))
        assert refused.stderr.strip() == (f"kiwb: error: device 'cuda:9': only "
                                          f"{torch.cuda.device_count()} CUDA device(s) here "
                                          f"(available here: cpu, {gpus})")
    else:
        assert refused.stderr.strip() == ("kiwb: error: device 'cuda:9': CUDA is not available "
                                          'here (available here: cpu); use device = "auto" or "cpu"')


def test_kiwb_jobs_shows_the_gpu_and_memory_a_job_recorded(tmp_path):
    # What a CUDA worker records (written here through the store's own API: no GPU here).
    (tmp_path / "kiwb.toml").write_text('name = "p"\n')
    worker = subprocess.Popen(["sleep", "60"])  # a live process to stand for the worker
    with Store(ProjectPaths(tmp_path).store) as store:
        running = store.jobs.create("train", "r", {})
        store.jobs.claim(running, pid=worker.pid)
        store.jobs.beat(running)
        store.jobs.started(running, {"device": "cuda:0", "gpu": "NVIDIA H100", "gpu_memory_gb": 79.1})
        store.jobs.record_progress(running, {"done": 5, "total": 10, "unit": "steps", "label": "train",
                                             "rate": 1.0, "eta_s": 5.0, "peak_memory_gb": 2.25})
        ended = store.jobs.create("score", "scores", {})
        store.jobs.end(ended, "finished", {"device": "cuda:1", "gpu": "NVIDIA H100",
                                           "peak_memory_gb": 7.5, "exit_code": 0})
    shown = run_kiwb("jobs", tmp_path, cwd=tmp_path).stdout
    worker.kill()
    worker.wait()
    assert "cuda:0 · 2.2 GB peak" in shown and "cuda:1 · NVIDIA H100 · 7.5 GB" in shown


def test_logs_and_cancel_read_the_folder_first_and_leave_the_job_out(tmp_path, capsys):
    """`kiwb logs DIR` shows the newest job's log and `kiwb cancel DIR` stops the one job that
    runs (a real process): the folder may come where the job id goes, as in every other
    command; a word that is no job id nor a folder is refused in one line."""
    from kiwb import cli

    root = tmp_path / "project"
    assert cli.main(["init", str(root)]) == 0
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store(ProjectPaths(root).store) as store:
            ids = []
            for number in (1, 2):  # the first ends before the second starts, as a rerun
                log = root / f"job{number}.log"
                log.write_text(f"the log of job {number}\n")
                ids.append(store.jobs.create("score", ScoreSpec.shared_run, {}))
                store.jobs.attach(ids[-1], pid=worker.pid, log_path=str(log))
                store.jobs.started(ids[-1], {})
                store.jobs.beat(ids[-1])  # a worker that handles SIGTERM, as a real one
                if number == 1:
                    store.jobs.end(ids[0], "finished", {})
            assert [job.live for job in store.jobs.all()] == [False, True]
        capsys.readouterr()
        assert cli.main(["logs", str(root)]) == 0
        assert capsys.readouterr().out == "the log of job 2\n"  # the newest
        assert cli.main(["logs", str(root), str(ids[0])]) == 0  # the folder, then the job
        assert cli.main(["logs", str(ids[0]), str(root)]) == 0  # the job, then the folder
        assert capsys.readouterr().out == "the log of job 1\n" * 2
        assert cli.main(["logs", "first", str(root)]) == 2
        assert capsys.readouterr().err == ("kiwb: error: 'first' is not a job id; give the "
                                           "number kiwb jobs lists: kiwb logs JOB [DIR]\n")
        assert cli.main(["cancel", str(root)]) == 0
        assert capsys.readouterr().out.startswith(f"asked job {ids[1]} (score) to stop")
        assert worker.wait(timeout=30) == -signal.SIGTERM
        with Store(ProjectPaths(root).store) as store:
            store.jobs.end(ids[1], "cancelled", {})
        assert cli.main(["cancel", str(root)]) == 2
        assert capsys.readouterr().err == f"kiwb: error: {root}: no job is running\n"
    finally:
        if worker.poll() is None:
            worker.kill()


def test_train_without_a_student_base_is_refused_before_a_job_is_recorded(tmp_path, capsys):
    """No [training] student and no --student: one line naming kiwb.toml's key and the flag,
    and no failed job (with a resume hint that cannot help) left in the project."""
    from kiwb import cli

    root = tmp_path / "project"
    assert cli.main(["init", str(root)]) == 0
    capsys.readouterr()
    assert cli.main(["train", str(root)]) == 2
    assert capsys.readouterr().err == (
        f"kiwb: error: {root / 'kiwb.toml'}: [training] student is not set; name a base "
        "checkpoint (folder or hub id) there or pass --student\n")
    with Store(ProjectPaths(root).store) as store:
        assert store.jobs.all() == []
