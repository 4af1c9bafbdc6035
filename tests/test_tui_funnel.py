"""The Accuracy pane's class funnel (w): where each class of the selected run went, from the
teachers to the student, read from the store a real run's events leave."""

from __future__ import annotations

from tui_support import (
    FUNNEL,
    run_async,
    synthetic_project,
    text_of,
    wait_for,
    workbench,
    write_run,
)

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.widgets import Plot

SIZE = (120, 40)


@run_async
async def test_the_funnel_view_names_the_step_that_loses_a_class(tmp_path):
    project = synthetic_project(tmp_path / "proj", trained=False)
    with Store(ProjectPaths(project).store) as store:
        write_run(project, store, funnel=FUNNEL)
        write_run(project, store, run="older", method="vanilla-kd")  # recorded without one
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        per_class = app.screen.query_one("#per-class", Plot)
        await wait_for(pilot, lambda: "Per-class accuracy" in text_of(per_class), what="the run")
        await pilot.press("w")
        await wait_for(pilot, lambda: "Where each class goes" in text_of(per_class),
                       what="the funnel view")
        shown = text_of(app.screen.query_one("#confusion"), width=200)
        on_pool, on_eval = ({line.split()[0]: line.split() for line in part.splitlines()
                             if line.strip()} for part in shown.split("Recall on eval"))
        # owner says, routed to it (share), targets, est. and target share; then the recall
        # steps with the student's recall at the kept evaluation (75% on music), lost at.
        assert on_pool["music"] == ["music", "b", "40", "8", "(20%)", "10", "20.0%", "5.0%"]
        assert on_eval["music"] == ["music", "90%", "20%", "20%", "75%", "routing"]
        assert on_eval["sports"][-4:] == ["100%", "100%", "100%", "100%"]
        assert on_eval["cooking"][-4:] == ["–", "–", "–", "–"]
        assert "Where each class goes, over 200 pool texts (w: back)" in text_of(per_class)
        assert "Recall on eval" in shown
        runs = app.screen.query_one("#runs-table")
        runs.move_cursor(row=[runs.get_row_at(i)[0] for i in range(runs.row_count)].index("older"))
        await wait_for(pilot, lambda: "No class funnel: supervised" in text_of(per_class),
                       what="the older run's note")
        await pilot.press("w")  # back to the classes
        await wait_for(pilot, lambda: "Per-class accuracy" in text_of(per_class), what="classes")
