"""Five teachers (issue 31): the Uncertainty, Accuracy and Conflicts panes at 80×24 and 140×40,
on a fixed five-teacher project (tui_support.many_teachers_project).

Update the pictures after a deliberate change with:
pytest tests/test_tui_many_teachers.py --snapshot-update
"""

from __future__ import annotations

import pytest
from textual.widgets import DataTable
from tui_support import (
    MANY_TEACHERS,
    cells,
    drawn_cells,
    many_teachers_project,
    text_of,
    wait_for,
    workbench,
)

from kiwb.tui.widgets import Plot

SIZES = [(80, 24), (140, 40)]
SIZE_IDS = [f"{width}x{height}" for width, height in SIZES]


def _ready(pane: str):
    def uncertainty(app):
        return "are conflicts" in text_of(app.screen.query_one("#margins", Plot))

    def accuracy(app):  # the run, the Ensemble and each teacher alone
        return app.screen.query_one("#runs-table", DataTable).row_count == 2 + len(MANY_TEACHERS)

    def conflicts(app):
        status = text_of(app.screen.query_one("#conflict-status"))
        return "shown" in status and "counting" not in status

    def teachers(app):
        return app.screen.query_one("#teachers-table", DataTable).row_count == len(MANY_TEACHERS)

    return {"uncertainty": uncertainty, "accuracy": accuracy, "conflicts": conflicts,
            "teachers": teachers}[pane]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return many_teachers_project(tmp_path_factory.mktemp("five") / "proj")


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("pane", ["uncertainty", "accuracy", "conflicts"])
def test_five_teachers_snapshot(snap_compare, project, pane, size):
    ready = _ready(pane)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: ready(pilot.app), what=f"the {pane} pane's data")
        await pilot.pause()

    assert snap_compare(workbench(project, pane=pane), terminal_size=size, run_before=run_before)


@pytest.mark.slow
def test_every_teacher_has_its_row_and_its_plots(project):
    """What the pictures show, asserted: five teachers alone in Accuracy and in the Teachers
    table; in Uncertainty two confidence plots each and a routing split each, side by side
    even at 80 columns."""
    import asyncio

    async def look(pane: str, size: tuple[int, int]) -> dict:
        app = workbench(project, pane=pane)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: _ready(pane)(app), what=f"the {pane} pane")
            await pilot.pause()
            if pane == "accuracy":
                return {"rows": [row[0] for row in cells(app.screen.query_one("#runs-table"))]}
            if pane == "teachers":
                return {"rows": drawn_cells(app.screen.query_one("#teachers-table"))[1:]}
            return {plot.id: text_of(plot, width=size[0]) for plot in app.screen.query(Plot)}

    rows = asyncio.run(look("accuracy", (120, 40)))["rows"]
    assert rows[2:] == [f"{name} alone" for name in MANY_TEACHERS]
    # Teachers: one row each with its own labels, none cut off at 80 columns
    rows = asyncio.run(look("teachers", (80, 24)))["rows"]
    assert [(row[0], row[1]) for row in rows] == [
        (name, ", ".join(labels)) for name, labels in MANY_TEACHERS.items()]
    for size in SIZES:
        plots = asyncio.run(look("uncertainty", size))
        for name in MANY_TEACHERS:
            assert f"{name} · MC dropout" in plots["teacher-confidence"], (name, size)
            assert f"{name} · plain confidence" in plots["teacher-confidence"], (name, size)
            assert f"{name}: won " in plots["routing-split"], (name, size)


def test_a_conflict_names_the_runner_up_among_three_or_more_teachers():
    """With five teachers "won by t2" hides whom the margin is measured against; with two
    it is the other one, so the cell stays as it was."""
    from kiwb.project.instances import Instance
    from kiwb.tui.panes.conflicts import won_by

    item = Instance(row=0, margin=0.05, routed=1, target=2, gold=None,
                    confidences=[0.40, 0.71, 0.10, 0.66, 0.30], text="x")
    assert won_by(item, ["t1", "t2", "t3", "t4", "t5"]) == "t2 over t4"
    two = Instance(row=0, margin=0.05, routed=1, target=2, gold=None, confidences=[0.6, 0.65],
                   text="x")
    assert won_by(two, ["a", "b"]) == "b"
