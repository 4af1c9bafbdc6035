"""The workbench on teachers fine-tuned from one base: the Jobs pane's merge form says that
their heads have one shape and other labels (where merging is in question, not in the Teachers
pane), starts a real `kiwb merge` job, and its run shows in the Accuracy pane beside the trained
runs, marked merged."""

from __future__ import annotations

import pytest
from cli_helpers import run_kiwb
from test_merge_cli import _project, family  # noqa: F401  (family: a fixture)
from test_tui_real import worker_env  # noqa: F401  (jobs started here stay offline)
from textual.widgets import DataTable, Static
from tui_support import cells, run_async, text_of, wait_for, workbench

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.panes.jobs import JobsPane
from kiwb.tui.screens.forms import FormScreen

pytestmark = pytest.mark.slow
SIZE = (120, 40)


@run_async
async def test_merge_from_the_jobs_pane_shows_in_accuracy(family, worker_env):  # noqa: F811
    root, folders = family
    project = _project(root, folders, "workbench")
    run_kiwb("merge", project, "--method", "ties", "--lambda", "1", "--top-k", "20",
             "--foreground", cwd=root)
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")
        assert not app.screen.query("#head-clash")  # the Teachers pane leaves it to merging
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        await wait_for(pilot, lambda: any(row[0] == "merge-ties-lambda1-k20"
                                          for row in cells(runs)), what="the merge run")
        row = next(row for row in cells(runs) if row[0] == "merge-ties-lambda1-k20")
        assert row[1] == "merged" and row[2].endswith("%")
        await pilot.press("3")
        pane = app.screen.query_one(JobsPane)
        await wait_for(pilot, lambda: pane.seen_status is not None, what="the jobs")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the merge form")
        said = " ".join(" ".join(text_of(note, width=116).split())
                        for note in app.screen.query(Static))
        assert "Note: teachers a and b have classifier heads of the same shape (2 labels x 32)" \
            in said
        app.screen.query_one("#field-method").value = "average"
        await pilot.pause()
        await pilot.press("ctrl+s")
        jobs = pane.query_one("#jobs-table", DataTable)
        await wait_for(pilot, lambda: any(row[1] == "merge merge-average"
                                          and row[2] == "finished" for row in cells(jobs)),
                       timeout=120, what="the merge job to finish")
        await pilot.press("5")
        await wait_for(pilot, lambda: any(row[0] == "merge-average" for row in cells(runs)),
                       what="the new merge in Accuracy")
        # the train form starts a student from a merge run: the job carries it, and its run
        # is named after it
        await pilot.press("3")
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the train form")
        app.screen.query_one("#field-init_from_merge").value = "merge-average"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any(row[1].startswith("train ") for row in cells(jobs)),
                       what="the training job")
    with Store(ProjectPaths(project).store) as store:
        train = next(job for job in store.jobs.all() if job.kind == "train")
    assert train.run.endswith("-from-merge-average")
    assert train.spec.init_from_merge == "merge-average"
