"""The workbench on stores written by real workers on tiny models, and jobs launched from it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_helpers import Deadline, run_kiwb, write_project
from textual.widgets import DataTable, Input, Select, TabbedContent
from tiny import make_texts, write_jsonl
from tui_support import (
    cells,
    fill_form,
    record_notifications,
    run_async,
    text_of,
    wait_for,
    workbench,
    write_teacher,
)

from kiwb.project.config import load_config
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.panes.export import ExportPane
from kiwb.tui.panes.jobs import JobsPane
from kiwb.tui.panes.uncertainty import UncertaintyPane
from kiwb.tui.screens.detail import ConflictDetailScreen
from kiwb.tui.screens.forms import FormScreen
from kiwb.tui.widgets import Plot

pytestmark = pytest.mark.slow
SIZE = (100, 32)


@pytest.fixture
def worker_env(monkeypatch):
    """Jobs started from the workbench inherit this process's environment: keep them offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


def private_copy(scored_project: Path, target: Path) -> Path:
    """A copy of the shared scored project to change (its scores; no runs, no exports)."""
    shutil.copytree(scored_project, target, ignore=shutil.ignore_patterns("runs", "exports"))
    return target


@pytest.mark.slow
@run_async
async def test_panes_on_a_project_scored_and_integrated_by_real_workers(scored_project, tmp_path):
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project)
    # A threshold at the median margin: half the texts are conflicts, whatever the draws.
    summary = json.loads(run_kiwb("integrate", project, "--json", cwd=tmp_path).stdout)
    margins, routing = summary["margin_quantiles"], summary["routing"]["name"]  # auto's choice
    run_kiwb("integrate", project, "--threshold", f"{margins['0.5']:.6f}", cwd=tmp_path)
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        teachers = app.screen.query_one("#teachers-table", DataTable)
        await wait_for(pilot, lambda: teachers.row_count == 2, what="the teachers")
        rows = cells(teachers)
        assert [row[:3] for row in rows] == [["a", "sports, politics", "Bert"],
                                            ["b", "music, cooking", "Roberta"]]
        assert all(row[5] == "ok" and row[4].endswith("KB") for row in rows)

        await pilot.press("2")
        facts = app.screen.query_one("#unlabeled-facts")
        await wait_for(pilot, lambda: "160 rows" in text_of(facts), what="the data")

        await pilot.press("4")
        uncertainty = app.screen.query_one(UncertaintyPane)
        await wait_for(pilot, lambda: "are conflicts" in text_of(uncertainty.query_one("#margins")))
        confidence = text_of(uncertainty.query_one("#teacher-confidence", Plot))
        assert "a · MC dropout · 160 texts" in confidence and "b · MC dropout · 160 texts" in confidence
        assert f"routing accuracy: {routing}" in text_of(uncertainty.query_one("#routing", Plot))

        await pilot.press("6")
        conflicts = app.screen.query_one("#conflicts-table", DataTable)
        await wait_for(pilot, lambda: conflicts.row_count > 0, what="conflicting texts")
        margins = [float(row[0]) for row in cells(conflicts)]
        assert margins == sorted(margins)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen), what="details")
        shown = [text_of(plot) for plot in app.screen.query(Plot)]
        assert len(shown) == 2 and sum("· won ·" in text for text in shown) == 1
        assert "sports" in shown[0] and "music" in shown[1]
        await pilot.press("escape")

        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        await wait_for(pilot, lambda: runs.row_count >= 1, what="the ensemble baseline")
        assert cells(runs)[0][:2] == ["ensemble", "untrained"]


def _progress(cell: str) -> tuple[int, int] | None:
    """(done, total) from a progress cell such as "40/960 pairs"."""
    found = re.match(r"([\d,]+)/([\d,]+) ", cell)
    return (int(found[1].replace(",", "")), int(found[2].replace(",", ""))) if found else None


def _histogram_counts(plot) -> dict[str, int]:
    """Texts per teacher that the confidence histograms show ("a · MC dropout · 40 texts")."""
    return {teacher: int(count.replace(",", ""))
            for teacher, count in re.findall(r"(\w+) · MC dropout · ([\d,]+) texts", text_of(plot))}


@pytest.mark.slow
@run_async
async def test_a_scoring_job_launched_from_the_jobs_pane(teachers_dir, tmp_path, worker_env):
    # 480 texts × 2 teachers × K = 16 passes (set in the form): about 8 s of scoring once the models load (on an
    # idle core), so progress, recorded once a second, is shown mid-way, and the histograms
    # are still filling in after it (with 240 texts, under a loaded machine's full suite, the
    # job once ended between the two).
    texts = write_jsonl(tmp_path / "unlabeled.jsonl",
                        [{"text": row["text"]} for row in make_texts(480, seed=7)])
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            texts, scoring="mc_passes = 4\nshard_size = 8\n")
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.press("s")
        await fill_form(pilot, mc_passes="16")          # K for this job, saved to kiwb.toml
        await pilot.press("ctrl+s")
        jobs = app.screen.query_one("#jobs-table", DataTable)
        await wait_for(pilot, lambda: jobs.row_count == 1, what="the job")
        uncertainty = app.screen.query_one(UncertaintyPane)
        confidence = uncertainty.query_one("#teacher-confidence", Plot)
        states_seen, in_between, histograms_while_running = [], [], []
        deadline = Deadline(240, "the scoring job to finish")
        while (row := cells(jobs)[0])[2] != "finished":   # watched live, poll by poll
            assert row[2] in ("queued", "running"), f"the job ended {row[2]}: {notifications}"
            if not states_seen or states_seen[-1] != row[2]:
                states_seen.append(row[2])
            done, total = _progress(row[3]) or (0, 0)
            if 0 < done < total and row[4].endswith("/s") and row[5].startswith("ETA"):
                in_between.append(row[3:6])
            watching = app.screen.query_one(TabbedContent).active == "uncertainty"
            if in_between and not watching:
                await pilot.press("4")                     # then watch the histograms fill in
            elif watching and (counts := _histogram_counts(confidence)):
                histograms_while_running.append(counts)
            deadline.check()
            await pilot.pause(0.1)
        assert states_seen and states_seen[0] in ("queued", "running")
        assert in_between, "no progress between 0 and the total, with rate and ETA, was shown"
        progress, rate, eta = in_between[0]
        assert progress.endswith("/960 pairs") and re.fullmatch(r"[\d.,]+/s", rate)
        assert re.fullmatch(r"ETA \d+m \d\ds", eta)
        assert cells(jobs)[0][3] == "960/960 pairs"      # 480 texts × 2 teachers, from job.progress
        assert "unlabeled 480" in text_of(app.screen.query_one("#score-sets"))
        assert any("finished" in n and "press i to integrate" in n for n in notifications)

        await pilot.press("4")
        await wait_for(pilot, lambda: _histogram_counts(confidence) == {"a": 480, "b": 480},
                       timeout=3, what="the full histograms right after the job")
        assert histograms_while_running, "no histogram was shown while the job ran"
        assert sum(histograms_while_running[0].values()) < 960   # part of the texts, mid-way

        await pilot.press("3")
        await pilot.press("i")                           # integrate, from the same pane
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the integrate form")
        await pilot.press("ctrl+s")                      # the project's method and routing
        margins = uncertainty.query_one("#margins", Plot)
        await wait_for(pilot, lambda: "are conflicts" in text_of(margins), timeout=120,
                       what="the integration")
    assert load_config(project).scoring.mc_passes == 16


@pytest.mark.slow
@run_async
async def test_a_failing_job_is_explained_and_the_workbench_carries_on(teachers_dir, data_dir,
                                                                      tmp_path, worker_env):
    encoder = write_teacher(tmp_path / "encoder", ("x", "y"), architecture="BertModel")
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a", "b": encoder},
                            data_dir / "unlabeled.jsonl")
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        teachers = app.screen.query_one("#teachers-table", DataTable)
        await wait_for(pilot, lambda: teachers.row_count == 2)
        assert cells(teachers)[1][-1] == "✗ problem"   # flagged before anything runs
        await pilot.press("3")
        await pilot.press("s")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("Job failed" in n for n in notifications), timeout=120,
                       what="the failure")
        failure = next(n for n in notifications if "Job failed" in n)
        assert "not a sequence classifier" in failure and "launch it again" in failure
        log = app.screen.query_one("#job-log")
        # the error names the teacher's folder: read on one line, whatever the folder's depth
        await wait_for(pilot, lambda: "not a sequence classifier" in text_of(log, width=400),
                       what="the log")
        await pilot.press("1")                            # the workbench carries on
        assert app.screen.query_one("#teachers-table", DataTable).row_count == 2


def _events(project: Path, run: str, kind: str) -> list[dict]:
    with Store(ProjectPaths(project).store) as store:
        return [event["data"] for event in store.events_after(run=run, kind=kind)]


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


async def _launch_training(pilot, **values: str) -> tuple[DataTable, int]:
    """Open the training form from the Jobs pane, fill it and launch; returns the jobs table
    and the new job's row (below the jobs `kiwb score` recorded, if any)."""
    await pilot.press("3")
    pane = pilot.app.screen.query_one(JobsPane)
    await wait_for(pilot, lambda: pane.seen_status is not None, what="the first read of the store")
    jobs = pane.query_one("#jobs-table", DataTable)
    row = jobs.row_count
    await pilot.press("t")
    await fill_form(pilot, **values)
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: jobs.row_count == row + 1, what="the training job")
    assert cells(jobs)[row][1].startswith("train ")
    return jobs, row


@pytest.mark.slow
@run_async
async def test_training_launched_from_the_jobs_pane_reaches_the_accuracy_pane(
        scored_project, tmp_path, worker_env):
    project = private_copy(scored_project, tmp_path / "proj")
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        jobs, row = await _launch_training(pilot, method="muki-soft", epochs="4")  # 40 steps
        statuses = set()

        def ended() -> bool:
            statuses.add(cells(jobs)[row][2])
            return cells(jobs)[row][2] in ("finished", "failed", "lost")

        await wait_for(pilot, ended, timeout=240, what="the training job to end")
        assert "running" in statuses, statuses
        job_id = int(cells(jobs)[row][0])
        run = "muki-soft"  # tau acts only on raw confidences, so the default routing's name has none
        assert cells(jobs)[row][1:3] == [f"train {run}", "finished"], notifications
        assert any("Job finished" in n and "see Accuracy (5)" in n for n in notifications)

        evaluations = _events(project, run, "train.eval")
        assert [e["step"] for e in evaluations] == [20, 40]   # eval_every = 20, and the last step
        best = max(evaluations, key=lambda e: e["accuracy"])
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        check = _events(project, run, "train.done")[-1]["best"]["check"]  # 40 steps may be few
        state = "done" + (f" ⚠ {check['status']}" if check["status"] != "ok" else "")
        await wait_for(pilot, lambda: cells(runs) and cells(runs)[0][1] == state,
                       what="the run in the Accuracy pane")
        assert cells(runs)[0][:5] == [
            run, state, _percent(evaluations[-1]["accuracy"]),
            f"{_percent(best['accuracy'])} @{best['step']}", _percent(evaluations[-1]["macro_f1"])]
        assert f"{run} · step 40/40" in text_of(app.screen.query_one("#curves"))  # named once
        per_class = text_of(app.screen.query_one("#per-class"))
        assert "Per-class accuracy at step 40" in per_class
        for label, accuracy in evaluations[-1]["per_class_accuracy"].items():
            assert re.search(rf"{label}\b.*{re.escape(_percent(accuracy))}", per_class), label
    with Store(ProjectPaths(project).store) as store:
        settings = store.jobs.get(job_id).settings
    assert (settings["method"], settings["epochs"]) == ("muki-soft", 4.0)


@pytest.mark.slow
@run_async
async def test_a_training_job_cancelled_from_the_jobs_pane_stops_at_a_batch_boundary(
        scored_project, tmp_path, worker_env):
    project = private_copy(scored_project, tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        jobs, row = await _launch_training(pilot, epochs="100")  # 1,000 steps: cancelled long before
        await wait_for(pilot, lambda: (_progress(cells(jobs)[row][3]) or (0,))[0] > 0, timeout=120,
                       what="the first steps")
        job_id = int(cells(jobs)[row][0])
        await pilot.press(*["down"] * row)               # the cursor onto the training job
        await pilot.press("c")
        deadline = Deadline(60, "the job to stop")
        while (status := cells(jobs)[row][2]) != "cancelled":
            assert status in ("running", "cancelling"), f"the job ended {status}"
            deadline.check()
            await pilot.pause(0.1)
        log = app.screen.query_one("#job-log")
        await wait_for(pilot, lambda: "Stopped at step" in text_of(log, width=200), what="the log")
    with Store(ProjectPaths(project).store) as store:
        ending = store.jobs.get(job_id).ending
    stopped = _events(project, "muki-hard", "train.stopped")
    assert ending["exit_code"] == 130 and "killed" not in ending and "at_once" not in ending
    assert [event["step"] for event in stopped] == [ending["step"]] and 0 < ending["step"] < 1000
    assert f"Stopped at step {ending['step']} of 1000, checkpointed." in text_of(log, width=200)
    checkpoint = ProjectPaths(project).run_dir("muki-hard") / "checkpoints" / f"step-{ending['step']:07d}"
    assert checkpoint.is_dir(), "the batch it stopped after was checkpointed"


@pytest.mark.slow
@run_async
async def test_a_run_exported_from_the_export_pane_loads_in_a_pipeline(scored_project, tmp_path,
                                                                     worker_env):
    from transformers import pipeline

    project = private_copy(scored_project, tmp_path / "proj")
    run_kiwb("train", project, "--run", "soft", "--method", "muki-soft", "--epochs", "2",
             cwd=tmp_path)                               # 20 steps: one checkpoint, step 20
    destination = tmp_path / "student"
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        runs = app.screen.query_one("#export-runs", DataTable)
        await wait_for(pilot, lambda: runs.row_count == 1, what="the trained run")
        pane = app.screen.query_one(ExportPane)
        await wait_for(pilot, lambda: "step-0000020" in dict(pane.checkpoint_options),
                       what="the run's checkpoints")
        app.screen.query_one("#export-checkpoint", Select).value = "step-0000020"  # by its name
        app.screen.query_one("#export-destination", Input).value = str(destination)
        runs.focus()
        await pilot.pause()
        await pilot.press("e")
        status = app.screen.query_one("#export-status")
        await wait_for(pilot, lambda: "finished" in text_of(status) or "failed" in text_of(status),
                       timeout=120, what="the export job")
        assert re.fullmatch(rf"export job \d+: finished → {re.escape(str(destination))}",
                            text_of(status, width=200).strip())
        assert str(destination) in text_of(app.screen.query_one("#export-how"), width=200)
    manifest = json.loads((destination / "kiwb-manifest.json").read_text())
    assert (manifest["checkpoint"], manifest["step"]) == ("step-0000020", 20)
    union = ["sports", "politics", "music", "cooking"]
    assert manifest["labels"] == union
    classify = pipeline("text-classification", model=str(destination))
    predictions = classify(["guitar album concert band song", "election vote senate minister law"])
    assert all(prediction["label"] in union for prediction in predictions)
