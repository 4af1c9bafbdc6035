"""Snapshots of every pane and dialog at 80×24 and 140×40, and one in the 16-colour theme,
on fixed data (no clocks, no pids, no random paths). tests/test_tui_fit.py checks the same
views for cut words.

Update them after a deliberate change with: pytest tests/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.widgets import DataTable, Input
from tui_support import (
    FUNNEL,
    cells,
    steady_cursors,
    synthetic_project,
    text_of,
    wait_for,
    workbench,
    write_jobs,
    write_run,
)

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.screens.forms import FormScreen
from kiwb.tui.widgets import Plot

SIZES = [(80, 24), (140, 40)]
SIZE_IDS = [f"{width}x{height}" for width, height in SIZES]
# Typed in the Export pane instead of the default under the test's random temporary folder.
EXPORT_DESTINATION = "/srv/kiwb/students/muki-hard"


def _tables_settled(app) -> bool:
    """Every visible table's columns are as wide as their cells: DataTable widens them on
    its next idle after rows arrive, so a picture taken before that has a stale header."""
    for table in app.screen.query(DataTable):
        for key, column in table.columns.items():
            cells = table.get_column(key)
            widest = max((Text.from_markup(cell).cell_len if isinstance(cell, str) else
                          Text(cell.plain if isinstance(cell, Text) else str(cell)).cell_len
                          for cell in cells), default=0)
            if column.content_width < widest:
                return False
    return True


def _ready(pane: str):
    """What must be on screen before the picture is taken."""
    def teachers(app):
        return app.screen.query_one("#teachers-table", DataTable).row_count == 2

    def uncertainty(app):
        return "are conflicts" in text_of(app.screen.query_one("#margins", Plot))

    def accuracy(app):
        return app.screen.query_one("#runs-table", DataTable).row_count == 4

    def conflicts(app):
        return "shown" in text_of(app.screen.query_one("#conflict-status")) and \
            "counting" not in text_of(app.screen.query_one("#conflict-status"))

    def data(app):
        return all("10 rows" in text_of(app.screen.query_one(f"#{role}-facts"))
                   for role in ("unlabeled", "eval"))

    def jobs(app):
        return [row[2] for row in cells(app.screen.query_one("#jobs-table", DataTable))] == \
            ["finished", "failed", "running"] and "job 1" in text_of(app.screen.query_one("#job-log"))

    def export(app):
        return app.screen.query_one("#export-runs", DataTable).row_count == 1 and \
            EXPORT_DESTINATION in text_of(app.screen.query_one("#export-how"), width=200)

    return {"teachers": teachers, "uncertainty": uncertainty, "accuracy": accuracy,
            "conflicts": conflicts, "data": data, "jobs": jobs, "export": export}[pane]


def _settled(pane: str):
    """Wait, before the picture, for the pane's data and for its tables to be sized."""
    ready = _ready(pane)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: ready(pilot.app) and _tables_settled(pilot.app),
                       what=f"the {pane} pane's data")
        await pilot.pause()

    return run_before


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return synthetic_project(tmp_path_factory.mktemp("snapshots") / "proj")


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("pane", ["teachers", "data", "uncertainty", "accuracy", "conflicts"])
def test_pane_snapshot(snap_compare, project, pane, size):
    assert snap_compare(workbench(project, pane=pane), terminal_size=size,
                        run_before=_settled(pane))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_jobs_pane_snapshot(snap_compare, tmp_path, size):
    project = synthetic_project(tmp_path / "proj")
    with Store(ProjectPaths(project).store) as store:
        running = write_jobs(store)
    settled = _settled("jobs")

    async def run_before(pilot) -> None:
        with Store(ProjectPaths(project).store) as store:
            store.jobs.beat(running)   # still running, however long the app took to start
        pilot.app.screen.refresh_now()
        await settled(pilot)

    assert snap_compare(workbench(project, pane="jobs"), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_export_pane_snapshot(snap_compare, project, size):
    settled = _settled("export")

    async def run_before(pilot) -> None:
        pilot.app.screen.query_one("#export-destination", Input).value = EXPORT_DESTINATION
        await settled(pilot)
        steady_cursors(pilot.app)

    assert snap_compare(workbench(project, pane="export"), terminal_size=size,
                        run_before=run_before)


def test_ansi_theme_snapshot(snap_compare, project):
    """The 16-colour theme: every plot colour is one of the terminal's own."""
    assert snap_compare(workbench(project, pane="uncertainty", theme="kiwb-ansi"),
                        terminal_size=(120, 40), run_before=_settled("uncertainty"))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_conflicts_pane_with_labels_snapshot(snap_compare, tmp_path, size):
    """Three texts labeled (one none of these), labeling mode on: the label column, the
    header's agreement and the legend of the number keys."""
    from tui_support import TEXTS

    from kiwb.project.labels import give_labels

    project = synthetic_project(tmp_path / "proj")
    with Store(ProjectPaths(project).store) as store:
        give_labels(store.connection, [(TEXTS[9], "sports"), (TEXTS[8], None),
                                       (TEXTS[1], "politics")])
    settled = _settled("conflicts")

    async def run_before(pilot) -> None:
        await settled(pilot)
        header = pilot.app.screen.query_one("#label-header")
        await wait_for(pilot, lambda: "here" in text_of(header), what="the labels' header")
        pilot.app.screen.query_one("#conflicts-table").focus()
        await pilot.press("l")
        await pilot.pause()

    assert snap_compare(workbench(project, pane="conflicts"), terminal_size=size,
                        run_before=run_before)


# Each dialog over the pane it opens from, and the keys that open it.
DIALOGS = {"help": ("teachers", ["question_mark"]), "score form": ("jobs", ["s"]),
           "integrate form": ("jobs", ["i"]), "train form": ("jobs", ["t"]),
           # (the add-teacher dialog lists the folder kiwb runs in: tests/test_tui_fit.py reads it)
           "merge form": ("jobs", ["m"]),
           "conflict detail": ("conflicts", ["enter"]), "where classes go": ("accuracy", ["w"])}


@pytest.fixture(scope="module")
def funnel_project(tmp_path_factory):
    """The synthetic project with a run whose class funnel was recorded (w shows it)."""
    root = synthetic_project(tmp_path_factory.mktemp("funnel") / "proj", trained=False)
    with Store(ProjectPaths(root).store) as store:
        write_run(root, store, funnel=FUNNEL)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("dialog", DIALOGS)
def test_dialog_snapshot(snap_compare, funnel_project, dialog, size):
    pane, keys = DIALOGS[dialog]
    # this project has no jobs: its Jobs pane is ready once its table is there
    settled = _settled(pane) if pane != "jobs" else None

    async def run_before(pilot) -> None:
        if settled is not None:
            await settled(pilot)
        else:
            await wait_for(pilot, lambda: pilot.app.screen.query("#jobs-table"), what="the Jobs pane")
            await pilot.pause(0.3)
        opened_from = pilot.app.screen
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        # a dialog is composed on a later turn, and a form's first field takes focus after
        # that; where classes go is drawn in the Accuracy pane itself
        if dialog == "where classes go":
            await wait_for(pilot, lambda: "On the pool" in text_of(
                pilot.app.screen.query_one("#confusion"), width=200), what="the funnel")
        else:
            await wait_for(pilot, lambda: pilot.app.screen is not opened_from and (
                not isinstance(pilot.app.screen, FormScreen) or pilot.app.focused is not None),
                what=f"the {dialog}")
        await pilot.pause()
        steady_cursors(pilot.app)

    assert snap_compare(workbench(funnel_project, pane=pane), terminal_size=size,
                        run_before=run_before)
