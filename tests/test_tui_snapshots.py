"""Snapshots of the main panes at 80×24 and 120×40, on fixed data (no clocks, no random paths).

Update them after a deliberate change with: pytest tests/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.widgets import DataTable
from tui_support import synthetic_project, text_of, wait_for, workbench

from kiwb.tui.widgets import Plot

SIZES = [(80, 24), (120, 40)]


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

    return {"teachers": teachers, "uncertainty": uncertainty, "accuracy": accuracy,
            "conflicts": conflicts}[pane]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return synthetic_project(tmp_path_factory.mktemp("snapshots") / "proj")


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("pane", ["teachers", "uncertainty", "accuracy", "conflicts"])
def test_pane_snapshot(snap_compare, project, pane, size):
    ready = _ready(pane)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: ready(pilot.app) and _tables_settled(pilot.app),
                       what=f"the {pane} pane's data")
        await pilot.pause()

    assert snap_compare(workbench(project, pane=pane), terminal_size=size, run_before=run_before)
