"""The Accuracy pane's class funnel (w): where each class of the selected run went, from the
teachers to the student, read from the store a real run's events leave."""

from __future__ import annotations

from tui_support import run_async, synthetic_project, text_of, wait_for, workbench, write_run

from kiwb.project.paths import ProjectPaths
from kiwb.project.records import ClassFunnel, LabeledFunnel
from kiwb.project.store import Store
from kiwb.tui.widgets import Plot

SIZE = (120, 40)
# music is lost at the routing: its owner says it on 90% of its eval texts, the routing sends
# 20% to that owner. The run's kept evaluation (write_run's) gives the student's recall.
FUNNEL = ClassFunnel(
    labels=["sports", "politics", "music", "cooking"],
    owners={"sports": ["a"], "politics": ["a"], "music": ["b"], "cooking": ["b"]},
    num_texts=200, owner_says=[60, 70, 40, 30], routed_to_owner=[55, 60, 8, 28],
    target_texts=[70, 80, 10, 40], target_share=[0.35, 0.4, 0.05, 0.2],
    estimated_share=[0.3, 0.3, 0.2, 0.2],
    labeled=LabeledFunnel(where="eval", gold=[3, 2, 5, 0], owner_recall=[1.0, 1.0, 0.9, None],
                          routed_recall=[1.0, 1.0, 0.2, None],
                          target_recall=[1.0, 0.5, 0.2, None]))


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
        lines = {line.split()[0]: line for line in shown.splitlines() if line.strip()}
        # owner says, routed to it (share), targets, est. and target share, then the recall
        # steps with the student's recall at the kept evaluation (75% on music), lost at.
        assert lines["music"].split() == ["music", "b", "40", "8", "(20%)", "10", "20.0%", "5.0%",
                                          "90%", "20%", "20%", "75%", "routing"]
        assert lines["sports"].split()[-4:] == ["100%", "100%", "100%", "100%"]
        assert lines["cooking"].split()[-4:] == ["–", "–", "–", "–"]
        assert "over 200 pool texts; recall on eval" in text_of(per_class)
        runs = app.screen.query_one("#runs-table")
        runs.move_cursor(row=[runs.get_row_at(i)[0] for i in range(runs.row_count)].index("older"))
        await wait_for(pilot, lambda: "has no class funnel" in text_of(per_class),
                       what="the older run's note")
        await pilot.press("w")  # back to the classes
        await wait_for(pilot, lambda: "Per-class accuracy" in text_of(per_class), what="classes")
