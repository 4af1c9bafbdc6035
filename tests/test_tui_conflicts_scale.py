"""The conflicts pane stays responsive on a store with many scored texts (paged, never all)."""

from __future__ import annotations

import time

import pytest
from textual.widgets import DataTable, Input
from tui_support import many_instances, run_async, text_of, wait_for, workbench, write_config

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.panes.conflicts import PAGE

TEXTS = 100_000
OPEN_WITHIN_S = 1.0
# Timed in this process's CPU time (every thread: the pages are read off the UI thread), not
# wall time: the suite runs another test on the other core, and one that trains or spawns
# ranks can hold both for a while, so wall time measures it, not the pane (alone, each step
# here takes 0.1-0.2 s of either). CPU time still catches a pane that reads every row.
clock = time.process_time


@pytest.mark.slow
@run_async
async def test_conflicts_pane_opens_within_a_second_on_100k_texts(tmp_path):
    root = write_config(tmp_path / "proj")
    with Store(ProjectPaths(root).store) as store:
        many_instances(store, TEXTS)
        under = store.connection.execute(
            "SELECT COUNT(*) FROM instances WHERE integration = 'big' AND margin < 0.1").fetchone()[0]
    app = workbench(root, pane="conflicts")
    async with app.run_test(size=(100, 30)) as pilot:
        started = clock()   # the screen is up; the first page is read off the UI thread
        conflicts = app.screen.query_one("#conflicts-table", DataTable)
        await wait_for(pilot, lambda: conflicts.row_count > 0, timeout=10, what="the first page")
        opened = clock() - started
        assert opened < OPEN_WITHIN_S, f"the conflicts pane took {opened:.2f}s to show texts"
        assert conflicts.row_count == PAGE                  # one page, not 100,000 rows
        status = app.screen.query_one("#conflict-status")
        await wait_for(pilot, lambda: f"{under:,} texts under margin 0.1" in text_of(status),
                       what="the count")

        conflicts.focus()
        conflicts.move_cursor(row=PAGE - 1)                  # near the end: the next page comes
        await wait_for(pilot, lambda: conflicts.row_count == 2 * PAGE, what="the second page")
        margins = [float(conflicts.get_row_at(i)[0]) for i in range(conflicts.row_count)]
        assert margins == sorted(margins)

        app.screen.query_one("#conflict-margin", Input).value = ""
        app.screen.query_one("#conflict-search", Input).value = "#77777"
        await wait_for(pilot, lambda: conflicts.row_count == 1, what="the search")
        assert conflicts.get_row_at(0)[5].endswith("#77777")

        app.screen.query_one("#conflict-search", Input).value = ""
        await wait_for(pilot, lambda: conflicts.row_count == PAGE, what="every text again")
        conflicts.focus()
        started = clock()
        await pilot.press("o")  # most useful next: read group by group, as fast as by margin
        await wait_for(pilot, lambda: "most useful next" in text_of(status)
                       and conflicts.row_count == PAGE, what="the useful order")
        assert clock() - started < OPEN_WITHIN_S
        started = clock()
        await pilot.press("o")  # a random sample: read by the content-hash index, as fast
        await wait_for(pilot, lambda: "random sample" in text_of(status)
                       and conflicts.row_count == PAGE, what="the sample order")
        assert clock() - started < OPEN_WITHIN_S
