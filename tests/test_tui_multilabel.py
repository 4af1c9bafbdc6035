"""The workbench on a multi-label project scored and integrated by the real CLI: the Conflicts
pane lists (text, shared label) pairs whose owners disagree as "[label] text"; a pair labeled
there (its label: yes; 0: no) survives a restart, and kiwb integrate --labels teaches it."""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_bad_input import run_kiwb
from test_multilabel_cli import ml_root, write_ml_project  # noqa: F401  (ml_root: a fixture)
from tui_support import cells, fill_form, run_async, text_of, wait_for, workbench

from kiwb.project.paths import ProjectPaths
from kiwb.tui.panes.conflicts import ConflictsPane

pytestmark = pytest.mark.slow
SIZE = (140, 36)
TEXT_COLUMN = 5
MUSIC_KEY = "3"  # the union is sports, politics, music, cooking: music is the third


@pytest.fixture(scope="module")
def integrated(ml_root, tmp_path_factory):  # noqa: F811  (the fixture imported above)
    project = write_ml_project(tmp_path_factory.mktemp("tui") / "proj", ml_root)
    for verb in ("score", "integrate"):
        done = run_kiwb(verb, project, "--foreground", cwd=project.parent)
        assert done.returncode == 0, done.stderr
    return project


def stored(project) -> dict[str, str | None]:
    with sqlite3.connect(ProjectPaths(project).store) as db:
        return dict(db.execute("SELECT text, label FROM text_labels").fetchall())


async def open_conflicts(pilot, app):
    await pilot.press("6")
    pane = app.screen.query_one(ConflictsPane)
    table = pane.main_widget()
    await wait_for(pilot, lambda: table.row_count >= 2, what="the conflicting pairs")
    table.focus()
    await pilot.pause()
    return table


@run_async
async def test_a_labeled_pair_survives_a_restart_and_becomes_a_target(integrated):
    app = workbench(integrated)
    async with app.run_test(size=SIZE) as pilot:
        table = await open_conflicts(pilot, app)
        shown = [row[TEXT_COLUMN].replace("\\[", "[") for row in cells(table)[:2]]
        # "[label] text", then the decision and each owner's answer
        assert all(cell.startswith("[music] ") for cell in shown)
        assert " · decided " in shown[0] and " a: " in shown[0] and " b: " in shown[0]
        first, second = (cell.split(" · decided ")[0] for cell in shown)
        await pilot.press("enter")  # the detail view: each owner's answer on the label
        await wait_for(pilot, lambda: len(app.screen.query("#detail-cluster")) == 1,
                       what="the pair's detail")
        detail = text_of(app.screen.query_one("#detail-cluster"), width=200)
        assert "each owner of the label" in detail and detail.count("confidence MC") == 2
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("l", MUSIC_KEY, "0")  # the first pair: yes, music; the second: no
        await wait_for(pilot, lambda: stored(integrated) == {first: "music", second: None},
                       what="two stored answers")
    restarted = workbench(integrated)
    async with restarted.run_test(size=SIZE) as pilot:
        table = await open_conflicts(pilot, restarted)
        await wait_for(pilot, lambda: [row[4] for row in cells(table)[:2]] == ["music", "none"],
                       what="the answers after a restart")
    done = run_kiwb("integrate", integrated, "--labels", "--json", cwd=integrated.parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["details"]["labeled_pairs"] == 2


@run_async
async def test_the_panes_show_each_label_per_teacher_and_per_run(integrated, tmp_path):
    """Uncertainty: each teacher's confidence on each label it owns; Accuracy: a trained
    student's F1 per label, micro and macro F1, Hamming loss and subset accuracy."""
    import shutil

    from textual.widgets import DataTable

    project = shutil.copytree(integrated, tmp_path / "proj")
    done = run_kiwb("train", project, "--run", "hard", "--foreground", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_for(pilot, lambda: "confidence per label" in text_of(
            app.screen.query_one("#label-confidence"), width=130), what="the labels' histograms")
        shown = text_of(app.screen.query_one("#label-confidence"), width=130)
        assert shown.count("confidence per label") == 2  # teachers a and b
        for label in ("sports", "politics", "music", "cooking"):
            assert label in shown
        await pilot.press("5")
        runs = app.screen.query_one("#runs-table", DataTable)
        await wait_for(pilot, lambda: cells(runs) and cells(runs)[0][0] == "hard",
                       what="the run in the Accuracy pane")
        await wait_for(pilot, lambda: "F1 per label" in text_of(app.screen.query_one("#per-class")),
                       what="F1 per label")
        figures = text_of(app.screen.query_one("#confusion"), width=200)
        assert "Hamming loss" in figures and "subset accuracy" in figures
        assert "micro F1" in text_of(app.screen.query_one("#curves"), width=130)


@run_async
async def test_the_train_form_and_the_cli_name_a_run_alike(integrated, tmp_path):
    """kiwb.toml's transfer = true, which the form does not show: the CLI named the run
    ant-transfer and the workbench ant. Both now name it by the same function, and the run's
    integration settings resolve alike."""
    import shutil

    from textual.widgets import Select

    from kiwb.project.job_specs import spec_of
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.store import Store
    from kiwb.project.teacher_kinds import load_project
    from kiwb.tui.launcher import cancel

    jobs = {}
    for way in ("cli", "workbench"):
        project = tmp_path / way
        shutil.copytree(integrated, project, ignore=shutil.ignore_patterns("runs", "logs"))
        config = project / "kiwb.toml"
        config.write_text(config.read_text() + "[integration]\ntransfer = true\n")
        if way == "cli":
            done = run_kiwb("train", project, "--method", "ant", "--detach", cwd=tmp_path)
            assert done.returncode == 0, done.stderr
        else:
            app = workbench(project)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("3", "t")
                form = await fill_form(pilot, wait=("method",))
                form.query_one("#field-method", Select).value = "ant"
                await pilot.press("ctrl+s")
                await wait_for(pilot, lambda app=app, form=form: app.screen is not form,
                               what="the form to close")
        with Store(ProjectPaths(project).store) as store:
            job = store.jobs.all()[-1]
        for _ in range(2):  # no need to train it: a second cancel ends it at once
            cancel(project, job.id)
        spec = spec_of(job.kind, job.settings, job.run)
        jobs[way] = (job.run, IntegrationSettings.from_project(
            load_project(project / "kiwb.toml"), **spec.integration_overrides()).pinned())
    assert jobs["cli"][0] == "ant-transfer"
    assert jobs["workbench"] == jobs["cli"]
