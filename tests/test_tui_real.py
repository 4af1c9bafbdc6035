"""The workbench on stores written by real workers on tiny models, and jobs launched from it."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from cli_helpers import run_kiwb, write_project
from textual.widgets import DataTable
from tui_support import (
    cells,
    record_notifications,
    run_async,
    text_of,
    wait_for,
    workbench,
    write_teacher,
)

from kiwb.project.config import load_config
from kiwb.tui.panes.uncertainty import UncertaintyPane
from kiwb.tui.screens.detail import ConflictDetailScreen
from kiwb.tui.widgets import Plot

pytestmark = pytest.mark.slow
SIZE = (100, 32)


@pytest.fixture
def worker_env(monkeypatch):
    """Jobs started from the workbench inherit this process's environment: keep them offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


@run_async
async def test_panes_on_a_project_scored_and_integrated_by_real_workers(scored_project, tmp_path):
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project)
    # A threshold at the median margin: half the texts are conflicts, whatever the draws.
    margins = json.loads(run_kiwb("integrate", project, "--json", cwd=tmp_path).stdout)["margin_quantiles"]
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
        assert "routing accuracy: MC dropout" in text_of(uncertainty.query_one("#routing", Plot))

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


@run_async
async def test_a_scoring_job_launched_from_the_jobs_pane(teachers_dir, data_dir, tmp_path, worker_env):
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            data_dir / "unlabeled.jsonl", scoring="mc_passes = 2\nshard_size = 8\n")
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.press("s")
        await pilot.press("ctrl+s")                      # K = 2 as configured, launch
        jobs = app.screen.query_one("#jobs-table", DataTable)
        await wait_for(pilot, lambda: jobs.row_count == 1, what="the job")
        states_seen = []
        deadline = time.monotonic() + 240
        while (row := cells(jobs)[0])[2] != "finished":   # watched live, poll by poll
            assert row[2] in ("queued", "running"), f"the job ended {row[2]}: {notifications}"
            if not states_seen or states_seen[-1] != row[2:4]:
                states_seen.append(row[2:4])
            assert time.monotonic() < deadline, "the scoring job did not finish in time"
            await pilot.pause(0.1)
        assert states_seen and states_seen[0][0] in ("queued", "running")
        assert cells(jobs)[0][3] == "96/96 texts"          # 48 texts × 2 teachers, from job.progress
        assert "48/48 texts" in text_of(app.screen.query_one("#score-sets"))
        assert any("finished" in n and "press i to integrate" in n for n in notifications)

        uncertainty = app.screen.query_one(UncertaintyPane)
        assert [(t.teacher, t.texts) for t in uncertainty.histograms.teachers()] == [("a", 48), ("b", 48)]
        await pilot.press("4")
        assert "b · MC dropout · 48 texts" in text_of(uncertainty.query_one("#teacher-confidence"))

        await pilot.press("3")
        await pilot.press("i")                           # integrate, from the same pane
        margins = uncertainty.query_one("#margins", Plot)
        await wait_for(pilot, lambda: "are conflicts" in text_of(margins), timeout=120,
                       what="the integration")
    assert load_config(project).scoring.mc_passes == 2


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
        await wait_for(pilot, lambda: "not a sequence classifier" in text_of(log), what="the log")
        await pilot.press("1")                            # the workbench carries on
        assert app.screen.query_one("#teachers-table", DataTable).row_count == 2
