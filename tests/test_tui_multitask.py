"""The workbench on a multi-task project scored, integrated and trained by the real CLI (the
tiny teachers of test_multitask_cli): the Teachers pane says which teacher answers which task,
the Uncertainty pane draws each task, the Accuracy pane shows each task's figures beside the
tasks' untrained references, and the Conflicts pane's number keys give the labels of the
selected conflict's task only."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from test_bad_input import run_kiwb
from test_multitask_cli import mt_root, write_mt_project  # noqa: F401  (mt_root: a fixture)
from tui_support import cells, run_async, text_of, wait_for, workbench

from kiwb.project.paths import ProjectPaths
from kiwb.tui.panes.conflicts import ConflictsPane

pytestmark = pytest.mark.slow
SIZE = (150, 44)


@pytest.fixture(scope="module")
def trained(mt_root, tmp_path_factory):  # noqa: F811  (the fixture imported above)
    project = write_mt_project(tmp_path_factory.mktemp("tui") / "proj", mt_root)
    for verb in ("score", "integrate", "train"):
        done = run_kiwb(verb, project, "--foreground", cwd=project.parent)
        assert done.returncode == 0, done.stderr
    return project


@run_async
async def test_the_panes_show_each_task(trained):
    from textual.widgets import DataTable

    app = workbench(trained)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")
        union = app.screen.query_one("#union")
        await wait_for(pilot, lambda: "tasks:" in text_of(union, width=140), what="the tasks")
        shown = text_of(union, width=140)
        assert "topic (single-label: a + b)" in shown and "tags (multi-label: c)" in shown
        teachers = app.screen.query_one("#teachers-table", DataTable)
        await wait_for(pilot, lambda: len(cells(teachers)) == 3, what="the teachers")
        assert cells(teachers)[1][1].startswith("topic: music, cooking")
        assert all("problem" not in row[5] for row in cells(teachers))  # kinds may differ here
        await pilot.press("4")
        tasks = app.screen.query_one("#task-uncertainty")
        await wait_for(pilot, lambda: "topic · single-label" in text_of(tasks, width=140),
                       what="the tasks' uncertainty")
        drawn = text_of(tasks, width=140)
        assert "tags · multi-label · one teacher (c)" in drawn and " won " in drawn
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        await wait_for(pilot, lambda: any(row[0] == "muki-hard" for row in cells(runs)),
                       what="the run in the Accuracy pane")
        names = [row[0] for row in cells(runs)]
        assert "ensemble · topic" in names and "ensemble · tags" in names
        assert "a alone · topic" in names and "c alone · tags" in names
        runs.move_cursor(row=names.index("muki-hard"))
        figures = app.screen.query_one("#confusion")
        await wait_for(pilot, lambda: "Tasks" in text_of(figures, width=140),
                       what="the tasks' figures")
        table = text_of(figures, width=140)
        assert "topic" in table and "accuracy" in table and "micro F1" in table
        assert "mean task score" in text_of(app.screen.query_one("#curves"), width=140)
        assert "tags/music" in text_of(app.screen.query_one("#per-class"), width=140)


@run_async
async def test_a_conflict_is_labeled_with_its_task_s_labels(trained, tmp_path):
    project = shutil.copytree(trained, tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        pane = app.screen.query_one(ConflictsPane)
        table = pane.main_widget()
        await wait_for(pilot, lambda: table.row_count >= 1, what="the conflicts")
        table.focus()
        await pilot.press("l")
        await pilot.pause()
        legend = text_of(app.screen.query_one("#label-legend"), width=140)
        assert "topic/sports" in legend and "tags/" not in legend
        first = pane._cursor_item()
        await pilot.press("4")  # the topic task's fourth label: cooking
        with sqlite3.connect(ProjectPaths(project).store) as db:
            await wait_for(pilot, lambda: db.execute("SELECT label FROM text_labels").fetchall(),
                           what="the stored label")
            assert db.execute("SELECT text, label FROM text_labels").fetchall() == [
                (first.text, "topic/cooking")]
    done = run_kiwb("integrate", project, "--labels", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
