"""The workbench on an NER project scored and integrated by the real CLI: the Teachers pane
names the kind and the entity types, the Conflicts pane lists clusters (their kind, the
sentence with the span marked, each teacher's tags), a cluster labeled there survives a
restart, and kiwb integrate --labels teaches it."""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_bad_input import run_kiwb
from test_token_cli import ner_root, write_ner_project  # noqa: F401  (ner_root: a fixture)
from tui_support import cells, run_async, text_of, wait_for, workbench

from kiwb.project.paths import ProjectPaths
from kiwb.tui.panes.conflicts import ConflictsPane

pytestmark = pytest.mark.slow
SIZE = (140, 36)
CLASS_COLUMN, LABEL_COLUMN, TEXT_COLUMN = 2, 4, 5


@pytest.fixture(scope="module")
def integrated(ner_root, tmp_path_factory):  # noqa: F811  (the fixture imported above)
    # Rank routing: with the kind's default (confidence) these tiny taggers' margins all
    # exceed the conflict threshold, and the pane needs clusters to list.
    project = write_ner_project(tmp_path_factory.mktemp("tui") / "proj", ner_root,
                                extra='[integration]\nrouting = "rank"')
    for args in (("score", "--foreground"), ("integrate", "--foreground")):
        done = run_kiwb(*args[:1], project, *args[1:], cwd=project.parent)
        assert done.returncode == 0, done.stderr
    return project


def stored(project) -> dict[str, str | None]:
    with sqlite3.connect(ProjectPaths(project).store) as db:
        return dict(db.execute("SELECT text, label FROM text_labels").fetchall())


async def open_conflicts(pilot, app):
    await pilot.press("6")
    pane = app.screen.query_one(ConflictsPane)
    table = pane.main_widget()
    await wait_for(pilot, lambda: table.row_count > 2, what="the clusters")
    table.focus()
    await pilot.pause()
    return table


@run_async
async def test_teachers_pane_names_the_kind_and_entity_types(integrated):
    app = workbench(integrated)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")
        detail = app.screen.query_one("#teacher-detail")
        await wait_for(pilot, lambda: "entity types" in text_of(detail, width=200),
                       what="the teacher's detail")
        shown = text_of(detail, width=200)
        assert "token classification (named entities) · entity types: LOC, MISC" in shown
        assert "tags read as bio" in shown
        union = text_of(app.screen.query_one("#union"), width=200)
        assert "union entity types" in union and "PER" in union


@run_async
async def test_a_labeled_cluster_survives_a_restart_and_becomes_a_target(integrated):
    app = workbench(integrated)
    async with app.run_test(size=SIZE) as pilot:
        table = await open_conflicts(pilot, app)
        rows = cells(table)
        first, second = rows[0][TEXT_COLUMN], rows[1][TEXT_COLUMN]
        kinds = ("type-clash", "boundary-clash", "entity-vs-none", "agree")
        assert first.split(" · ")[0] in kinds and "⟦" in first and "⟧" in first
        assert " a: " in first and " b: " in first  # each teacher's tags over the span
        await pilot.press("enter")  # the detail view: each teacher's reading of the span
        await wait_for(pilot, lambda: len(app.screen.query("#detail-cluster")) == 1,
                       what="the cluster's detail")
        shown = text_of(app.screen.query_one("#detail-cluster"), width=200)
        assert "each teacher over the marked words" in shown and "routing score" in shown
        assert shown.count("confidence MC") == 2
        await pilot.press("escape")
        await pilot.pause()
        legend_keys = "1"  # the first class is LOC: the cluster is labeled a location
        await pilot.press("l", legend_keys, "0")  # and the second: no entity
        marked = [text.split(" · ")[1] for text in (first, second)]
        await wait_for(pilot, lambda: stored(integrated) == {marked[0]: "LOC", marked[1]: None},
                       what="two stored labels")
    restarted = workbench(integrated)
    async with restarted.run_test(size=SIZE) as pilot:
        table = await open_conflicts(pilot, restarted)
        await wait_for(pilot, lambda: [row[LABEL_COLUMN] for row in cells(table)[:2]]
                       == ["LOC", "none"], what="the labels after a restart")
    done = run_kiwb("integrate", integrated, "--labels", "--json", cwd=integrated.parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["token"]["labeled_clusters"] == 2
