"""The workbench on an embedding project scored, integrated and trained by the real CLI (the
tiny encoders of test_embedding_cli): the Teachers pane gives each encoder's width and pooling,
the Uncertainty pane each teacher's steadiness under dropout and the pairs' spread, the Accuracy
pane the student's probes beside the teachers', their concatenation's and average's, and the
Conflicts pane lists pairs, judged with the number keys."""

from __future__ import annotations

import sqlite3

import pytest
from cli_helpers import run_kiwb
from test_embedding_cli import root, write_embedding_project  # noqa: F401  (root: a fixture)
from tui_support import cells, run_async, text_of, wait_for, workbench

from kiwb.project.paths import ProjectPaths
from kiwb.tui.panes.conflicts import ConflictsPane

pytestmark = pytest.mark.slow
SIZE = (140, 44)


@pytest.fixture(scope="module")
def trained(root, tmp_path_factory):  # noqa: F811  (the fixture imported above)
    project = write_embedding_project(tmp_path_factory.mktemp("tui") / "embed", root)
    for verb in ("score", "integrate", "train"):
        run_kiwb(verb, project, "--foreground", cwd=project.parent)
    return project


@run_async
async def test_the_panes_show_encoders_steadiness_and_probes(trained):
    from textual.widgets import DataTable

    app = workbench(trained)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")
        teachers = app.screen.query_one("#teachers-table", DataTable)
        await wait_for(pilot, lambda: len(cells(teachers)) == 2, what="the teachers")
        rows = cells(teachers)
        assert rows[0][1] == "32 wide, mean pooling" and rows[1][1] == "48 wide, cls pooling"
        assert all(row[5] == "ok" for row in rows)
        assert "sentence encoders" in text_of(app.screen.query_one("#union"), width=140)
        await pilot.press("4")
        confidence = app.screen.query_one("#teacher-confidence")
        await wait_for(pilot, lambda: "domain · steadiness" in text_of(confidence, width=140),
                       what="the steadiness histograms")
        assert "general · share read" in text_of(confidence, width=140)
        assert not app.screen.query_one("#routing").display  # no routing for encoders
        margins = text_of(app.screen.query_one("#margins"), width=140)
        assert "pairs listed in Conflicts (6)" in margins
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        await wait_for(pilot, lambda: any(row[0] == "mc" for row in cells(runs)),
                       what="the run in the Accuracy pane")
        names = [row[0] for row in cells(runs)]
        assert {"general alone", "domain alone", "concatenation", "average"} <= set(names)
        assert [str(column.label) for column in runs.ordered_columns][2] == "probe score"
        runs.move_cursor(row=names.index("mc"))
        figures = app.screen.query_one("#confusion")
        await wait_for(pilot, lambda: "Probes on the eval set" in text_of(figures, width=140),
                       what="the probes")
        table = text_of(figures, width=140)
        assert "kNN accuracy" in table and "MRR" in table and "concatenation" in table


@run_async
async def test_a_pair_is_judged_with_the_number_keys(trained, tmp_path):
    import shutil

    project = shutil.copytree(trained, tmp_path / "embed")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        pane = app.screen.query_one(ConflictsPane)
        table = pane.main_widget()
        await wait_for(pilot, lambda: table.row_count >= 1, what="the conflicting pairs")
        assert "pairs under margin" in text_of(app.screen.query_one("#conflict-status"), width=140)
        table.focus()
        await pilot.press("l")
        await pilot.pause()
        legend = text_of(app.screen.query_one("#label-legend"), width=140)
        assert "similar" in legend and "not similar" in legend
        first = pane._cursor_item()
        assert " ⟷ " in first.text
        await pilot.press("2")  # not similar
        with sqlite3.connect(ProjectPaths(project).store) as db:
            await wait_for(pilot, lambda: db.execute("SELECT label FROM text_labels").fetchall(),
                           what="the stored judgement")
            assert db.execute("SELECT text, label FROM text_labels").fetchall() == [
                (first.text, "not similar")]


@run_async
async def test_the_train_form_offers_the_pair_weightings(trained):
    from textual.widgets import Select
    from textual.widgets._select import InvalidSelectValueError

    from kiwb.tui.panes.jobs import JobsPane
    from kiwb.tui.screens.forms import FormScreen

    app = workbench(trained)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        pane = app.screen.query_one(JobsPane)
        await wait_for(pilot, lambda: pane.seen_status is not None, what="the jobs")
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the train form")
        method = app.screen.query_one("#field-method", Select)
        assert method.value == "mc"  # [embedding] weighting's default
        method.value = "maskout"
        with pytest.raises(InvalidSelectValueError):
            method.value = "muki-hard"  # a classifier's method is not offered


@run_async
async def test_the_accuracy_columns_are_the_probes_before_anything_ran(root, tmp_path):  # noqa: F811
    from textual.widgets import DataTable

    project = write_embedding_project(tmp_path / "fresh", root)  # kiwb.toml only
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        await wait_for(pilot, lambda: [str(column.label) for column in runs.ordered_columns][2]
                       == "probe score", what="the kind's columns from kiwb.toml")
