"""Snapshots of an embedding project's Teachers, Uncertainty, Accuracy and Conflicts panes at
80×24 and 140×40, on fixed data (tests/tui_embedding_support.py).

Update them after a deliberate change with:
pytest tests/test_tui_embedding_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from test_tui_snapshots import _tables_settled
from textual.widgets import DataTable
from tui_embedding_support import embedding_project
from tui_support import text_of, wait_for, workbench

SIZES = [(80, 24), (140, 40)]


def _ready(pane: str):
    def ready(app) -> bool:
        if pane == "teachers":
            return app.screen.query_one("#teachers-table", DataTable).row_count == 2
        if pane == "uncertainty":
            return "pairs listed" in text_of(app.screen.query_one("#margins"))
        if pane == "accuracy":
            return app.screen.query_one("#runs-table", DataTable).row_count == 5
        status = text_of(app.screen.query_one("#conflict-status"))
        return "shown" in status and "counting" not in status
    return ready


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return embedding_project(tmp_path_factory.mktemp("embedding-snapshots") / "proj")


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("pane", ["teachers", "uncertainty", "accuracy", "conflicts"])
def test_embedding_pane_snapshot(snap_compare, project, pane, size):
    ready = _ready(pane)

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: ready(pilot.app) and _tables_settled(pilot.app),
                       what=f"the {pane} pane's data")
        await pilot.pause()

    assert snap_compare(workbench(project, pane=pane), terminal_size=size, run_before=run_before)
