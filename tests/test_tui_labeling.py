"""Labeling conflicts in the workbench: keys, undo, a restart, the filters and orders, the
header line, and the detail view; on a store written by the store's own API."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from cli_helpers import run_kiwb
from textual.widgets import TabbedContent
from tui_support import (
    cells,
    drawn_cells,
    record_notifications,
    run_async,
    synthetic_project,
    text_of,
    wait_for,
    workbench,
)

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.panes.conflicts import ConflictsPane
from kiwb.tui.screens.detail import ConflictDetailScreen

SIZE = (100, 32)
LABEL_COLUMN, TEXT_COLUMN = 4, 5


def stored(project) -> dict[str, str | None]:
    with sqlite3.connect(ProjectPaths(project).store) as db:
        return dict(db.execute("SELECT text, label FROM text_labels").fetchall())


async def open_conflicts(pilot, app):
    await pilot.press("6")
    pane = app.screen.query_one(ConflictsPane)
    table = pane.main_widget()
    await wait_for(pilot, lambda: table.row_count == 8, what="the conflicts")
    table.focus()
    await pilot.pause()
    return pane, table


@run_async
async def test_five_labels_one_undone_survive_a_restart(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        shown = [row[TEXT_COLUMN] for row in cells(table)]
        await pilot.press("l")
        legend = app.screen.query_one("#label-legend")
        assert legend.display and "1 sports" in text_of(legend) and "4 cooking" in text_of(legend)
        # sports, music, none, (skip), politics, cooking: five decisions, then the last undone
        for key in ("1", "3", "0", "s", "2", "4"):
            await pilot.press(key)
        assert app.screen.query_one(TabbedContent).active == "conflicts"  # digits labeled
        expected = {shown[0]: "sports", shown[1]: "music", shown[2]: None, shown[4]: "politics",
                    shown[5]: "cooking"}
        await wait_for(pilot, lambda: stored(project) == expected, what="five stored labels")
        assert [row[LABEL_COLUMN] for row in cells(table)[:6]] == [
            "sports", "music", "none", "", "politics", "cooking"]
        assert table.cursor_row == 6  # on to the next unlabeled text
        await pilot.press("u")
        del expected[shown[5]]
        await wait_for(pilot, lambda: stored(project) == expected, what="the undo")
        await wait_for(pilot, lambda: cells(table)[5][LABEL_COLUMN] == "", what="the row cleared")
        assert table.cursor_row == 5  # back on the text whose label was taken back
        header = app.screen.query_one("#label-header")
        # a routes sports/politics, b music/cooking: the routing agrees where the label is its own
        await wait_for(pilot, lambda: "4 here (1 none)" in text_of(header), what="the header")
        await pilot.press("l")  # labeling off: the digits switch panes again
        await pilot.press("3")
        assert app.screen.query_one(TabbedContent).active == "jobs"

    restarted = workbench(project)
    async with restarted.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, restarted)
        assert [row[LABEL_COLUMN] for row in cells(table)[:6]] == [
            "sports", "music", "none", "", "politics", ""]
        await pilot.press("f")  # unlabeled only
        await wait_for(pilot, lambda: table.row_count == 4, what="the unlabeled texts")
        await pilot.press("f")  # labeled only
        await wait_for(pilot, lambda: sorted(row[TEXT_COLUMN] for row in cells(table)) == sorted(
            text for text in expected), what="the labeled texts")
        status = restarted.screen.query_one("#conflict-status")
        assert "· labeled ·" in text_of(status)


@run_async
async def test_label_mode_cannot_outlive_what_the_user_sees(tmp_path):
    """Esc, another pane or feeding the labels back each end label mode, with a notice; every
    label says what it gave and how to take it back; a digit pressed after switches panes."""
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        text = cells(table)[0][TEXT_COLUMN]
        await pilot.press("l")
        assert pane.labeling and "Esc leave" in text_of(app.screen.query_one("#label-legend"))
        await pilot.press("2")
        await wait_for(pilot, lambda: any("→ politics · u undo" in note for note in notes),
                       what="the label's notice")
        assert any(text[:20] in note for note in notes if "→ politics" in note)
        await pilot.press("escape")
        assert not pane.labeling and any("label mode off" in note for note in notes)
        await pilot.press("3")  # not a label now: the Jobs pane
        assert app.screen.query_one(TabbedContent).active == "jobs"
        await wait_for(pilot, lambda: len(stored(project)) == 1, what="the one label")

        pane, table = await open_conflicts(pilot, app)
        await pilot.press("l")
        assert pane.labeling
        app.screen.action_show_pane("uncertainty")  # a click on another tab, say
        await pilot.pause()
        assert not pane.labeling and not pane.has_class("labeling")
        await pilot.press("6")
        table.focus()
        await pilot.press("l")
        await pilot.press("r")  # the labels go back to an integration: label mode ends first
        assert not pane.labeling
        await pilot.press("3")
        assert app.screen.query_one(TabbedContent).active == "jobs"
    assert list(stored(project).values()) == ["politics"]  # no key labeled anything else


@run_async
async def test_the_label_column_widens_to_show_each_label_whole(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        assert drawn_cells(table)[0][LABEL_COLUMN] == "label"  # as wide as its header: no labels
        await pilot.press("l", "2", "4", "0")
        await wait_for(pilot, lambda: [row[LABEL_COLUMN] for row in drawn_cells(table)[1:5]]
                       == ["politics", "cooking", "none", ""], what="the labels drawn whole")
        await wait_for(pilot, lambda: len(stored(project)) == 3, what="the labels stored")


@run_async
async def test_the_header_counts_agreement_and_the_useful_order_skips_labeled_texts(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        header = app.screen.query_one("#label-header")
        assert "none yet" in text_of(header)
        shown = record_notifications(app)
        await pilot.press("r")  # nothing to feed back yet: said, and no job is started
        await wait_for(pilot, lambda: any("no labels yet" in note for note in shown),
                       what="the warning")
        rows = cells(table)
        first_won_by = rows[0][1]
        own = {"a": "sports", "b": "music"}
        other = {"a": "music", "b": "sports"}
        await pilot.press("l")
        # the first text gets a label of the teacher that won it, the second one it does not know
        await pilot.press("1" if own[first_won_by] == "sports" else "3")
        await pilot.press("3" if other[rows[1][1]] == "music" else "1")
        await wait_for(pilot, lambda: "routing agrees 1/2 (50%)" in text_of(header),
                       what="the agreement")
        await pilot.press("o")  # most useful next: unlabeled texts only
        status = app.screen.query_one("#conflict-status")
        await wait_for(pilot, lambda: "most useful next" in text_of(status) and table.row_count == 6,
                       what="the useful order")
        labeled = {rows[0][TEXT_COLUMN], rows[1][TEXT_COLUMN]}
        assert not labeled & {row[TEXT_COLUMN] for row in cells(table)}
        useful = [row[TEXT_COLUMN] for row in cells(table)]
        await pilot.press("o")  # a random sample: the same unlabeled texts, by content hash
        await wait_for(pilot, lambda: "random sample" in text_of(status), what="the sample order")
        await wait_for(pilot, lambda: table.row_count == 6, what="the sample's rows")
        assert sorted(row[TEXT_COLUMN] for row in cells(table)) == sorted(useful)
        await pilot.press("o")  # and round to lowest margin first, still the unlabeled texts
        await wait_for(pilot, lambda: "lowest margin first" in text_of(status)
                       and table.row_count == 6, what="the margin order")


@run_async
async def test_labeling_in_the_detail_view_moves_on_to_the_next_text(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        first, second = (row[TEXT_COLUMN] for row in cells(table)[:2])
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen), what="details")
        assert "2 politics" in text_of(app.screen.query_one("#detail-legend"))
        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen)
                       and app.screen.instance.text == second, what="the next text's details")
        await pilot.press("p")  # every label, in a list: the last entry is "none of these"
        await pilot.pause()
        await pilot.press("end", "enter")
        await wait_for(pilot, lambda: stored(project) == {first: "politics", second: None},
                       what="both decisions")


@run_async
async def test_keys_without_a_label_keep_labeling_and_a_picked_label_lands_on_the_text_shown(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        shown = [row[TEXT_COLUMN] for row in cells(table)]
        notes = record_notifications(app)
        await pilot.press("l", "6", "²")  # four labels: 6 labels nothing; ² is no number key
        assert app.screen.query_one(TabbedContent).active == "conflicts" and not stored(project)
        assert any("no label on 6" in note for note in notes)
        await pilot.press("p")  # the picker on the first text; meanwhile the list moves on
        await pilot.pause()
        table.move_cursor(row=3)
        await pilot.press("down", "enter")  # the second entry: politics
        await wait_for(pilot, lambda: stored(project) == {shown[0]: "politics"},
                       what="the picked label")
        assert cells(table)[0][LABEL_COLUMN] == "politics" and cells(table)[3][LABEL_COLUMN] == ""


@run_async
async def test_the_useful_order_lists_unlabeled_texts_whatever_the_filter_was(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        first = cells(table)[0][TEXT_COLUMN]
        await pilot.press("l", "1", "l")
        await wait_for(pilot, lambda: len(stored(project)) == 1, what="the label")
        await pilot.press("f", "f")  # the labeled texts, then most useful next
        await wait_for(pilot, lambda: table.row_count == 1, what="the labeled text")
        await pilot.press("o")
        status = app.screen.query_one("#conflict-status")
        await wait_for(pilot, lambda: "most useful next · unlabeled" in text_of(status)
                       and table.row_count == 7, what="the useful order")
        assert first not in {row[TEXT_COLUMN] for row in cells(table)}


@run_async
async def test_undo_in_the_detail_view_shows_the_text_taken_back(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        first, second = (row[TEXT_COLUMN] for row in cells(table)[:2])
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen), what="details")
        assert "u undo" in text_of(app.screen.query_one("#detail-legend"))
        await pilot.press("4")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen)
                       and app.screen.instance.text == second, what="the next text's details")
        await wait_for(pilot, lambda: stored(project) == {first: "cooking"}, what="the label")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen)
                       and app.screen.instance.text == first, what="the text taken back")
        await wait_for(pilot, lambda: stored(project) == {}, what="the undo")


@run_async
async def test_a_store_held_by_a_job_delays_labels_without_losing_one(tmp_path, monkeypatch):
    from kiwb.project import database

    monkeypatch.setattr(database, "BUSY_TIMEOUT_S", 0.2)  # "locked" after 0.2 s, not 30
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        shown = [row[TEXT_COLUMN] for row in cells(table)]
        notes = record_notifications(app)
        holder = sqlite3.connect(ProjectPaths(project).store, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # what a job rewriting the store holds
        await pilot.press("l", "1", "2", "u")
        await pilot.pause(1.5)  # several busy timeouts
        assert stored(project) == {} and [row[LABEL_COLUMN] for row in cells(table)[:2]] == [
            "sports", "politics"]
        holder.execute("COMMIT")
        holder.close()
        await wait_for(pilot, lambda: stored(project) == {shown[0]: "sports"},
                       what="the labels once the store is free")
        await wait_for(pilot, lambda: cells(table)[1][LABEL_COLUMN] == "", what="the undo shown")
        assert not any("busy" in note or "failed" in note.lower() for note in notes)


@run_async
async def test_feeding_back_only_none_labels_is_refused_before_any_job(tmp_path):
    project = synthetic_project(tmp_path / "proj")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        pane, table = await open_conflicts(pilot, app)
        notes = record_notifications(app)
        await pilot.press("l", "0", "0")
        await wait_for(pilot, lambda: len(stored(project)) == 2, what="two none decisions")
        header = app.screen.query_one("#label-header")
        await wait_for(pilot, lambda: "2 here (2 none)" in text_of(header), what="the header")
        await pilot.press("l", "t")
        await wait_for(pilot, lambda: any("no text of this list has a class label" in note
                                          for note in notes), what="the refusal")
        with Store(ProjectPaths(project).store) as store:
            assert not [job for job in store.jobs.all() if job.kind == "train"]


def test_a_second_run_from_labels_gets_a_name_of_its_own():
    from kiwb.tui.labeling import free_run_name

    taken = {"muki-hard-stacked-labels", "muki-hard-stacked-labels-2"}
    assert free_run_name("muki-hard-stacked-labels", taken.__contains__) == "muki-hard-stacked-labels-3"
    assert free_run_name("muki-hard-trust-labels", taken.__contains__) == "muki-hard-trust-labels"


@pytest.mark.slow
@run_async
async def test_labels_given_while_a_job_scores_are_kept_and_feed_an_integration_and_a_run(
        scored_project, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the jobs the workbench starts inherit it
    project = tmp_path / "proj"
    shutil.copytree(scored_project, project, ignore=shutil.ignore_patterns("runs", "exports"))
    run_kiwb("integrate", project, "--threshold", "1", cwd=tmp_path)  # every text is listed
    run_kiwb("train", project, "--epochs", "1", "--foreground", cwd=tmp_path)  # the run before
    config = project / "kiwb.toml"  # new scoring settings: a real job rewrites the scores
    text = config.read_text()
    assert "mc_passes = 4\nshard_size = 16" in text
    config.write_text(text.replace("mc_passes = 4\nshard_size = 16", "mc_passes = 12\nshard_size = 4"))
    run_kiwb("score", project, "--detach", cwd=tmp_path)
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
    assert job.kind == "score"
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        pane = app.screen.query_one(ConflictsPane)
        table = pane.main_widget()
        await wait_for(pilot, lambda: table.row_count > 20, what="the texts")
        # A busy machine can take seconds to start the worker: label once it writes scores.
        await wait_for(pilot, lambda: job_status(project, job.id) == "running"
                       and shards_written_since(project, job_started(project, job.id)) > 0,
                       timeout=120, what="the scoring job writing its first shard")
        table.focus()
        await pilot.press("l")
        gold = [row[3] for row in cells(table)[:8]]
        for label in gold:  # the simulated user knows each text's gold label
            await pilot.press(str(pane.labels.index(label) + 1))
        await wait_for(pilot, lambda: len(stored(project)) == 8, what="eight stored labels")
        await wait_for(pilot, lambda: job_status(project, job.id) == "finished", timeout=300,
                       what="the scoring job")
        with Store(ProjectPaths(project).store) as store:
            ended = store.jobs.get(job.id).ended_at
        assert label_times(project)[0] < ended  # labels were given while the job wrote the store
        assert len(stored(project)) == 8  # every label kept

        await pilot.press("r")  # integrate with the labels
        header = app.screen.query_one("#label-header")
        # fitted on the labels: not measured by them; in use once it read them as they are
        await wait_for(pilot, lambda: "without them agreed" in text_of(header)
                       and "in use" in text_of(header), timeout=120,
                       what="the integration with the labels")
        await pilot.press("t")  # and a student run from it
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table")
        await wait_for(pilot, lambda: {"muki-hard", "muki-hard-stacked-labels"} <= {
            row[0] for row in cells(runs)} and any(
            row[0] == "muki-hard-stacked-labels" and row[1].startswith("done") for row in cells(runs)),
            timeout=300, what="the new run beside the one before")


def job_status(project, job_id: int) -> str:
    with Store(ProjectPaths(project).store) as store:
        return store.jobs.get(job_id).status


def job_started(project, job_id: int) -> float:
    with Store(ProjectPaths(project).store) as store:
        return store.jobs.get(job_id).started_at or float("inf")


def shards_written_since(project, since: float) -> int:
    with sqlite3.connect(ProjectPaths(project).store) as db:
        return db.execute("SELECT count(*) FROM score_shards WHERE status = 'done' "
                          "AND finished_at > ?", (since,)).fetchone()[0]


def label_times(project) -> list[float]:
    with sqlite3.connect(ProjectPaths(project).store) as db:
        return [t for (t,) in db.execute("SELECT given_at FROM text_labels ORDER BY given_at")]


KILLED_WORKBENCH = """
import asyncio, os, signal, sys
sys.path.insert(0, {tests!r})
from tui_support import wait_for, workbench
from kiwb.tui.panes.conflicts import ConflictsPane

async def main():
    app = workbench({project!r}, pane="conflicts")
    async with app.run_test(size=(100, 32)) as pilot:
        table = app.screen.query_one(ConflictsPane).main_widget()
        await wait_for(pilot, lambda: table.row_count == 8, what="the conflicts")
        table.focus()
        await pilot.press("l", "1", "2", "0")
        header = app.screen.query_one("#label-header")
        await wait_for(pilot, lambda: "3 here" in str(header.content), what="three labels")
        print("labeled", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no clean exit: nothing after this runs

asyncio.run(main())
"""


def test_labels_outlive_a_killed_workbench(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    project = synthetic_project(tmp_path / "proj")
    script = KILLED_WORKBENCH.format(tests=str(Path(__file__).parent), project=str(project))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -9 and "labeled" in done.stdout, done.stderr[-2000:]
    assert sorted(label for label in stored(project).values() if label) == ["politics", "sports"]
    assert len(stored(project)) == 3  # the none decision too
