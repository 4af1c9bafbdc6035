"""Every pane of the workbench against a project whose store was written by the store's API."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from textual.widgets import Checkbox, DataTable, DirectoryTree, Input, Select, Static, TabbedContent
from tui_support import (
    INTEGRATION_KEY,
    JOB_CLOCK,
    UNION,
    cells,
    drawn_cells,
    fill_form,
    integration_summary,
    record_integration,
    record_notifications,
    routed,
    run_async,
    synthetic_project,
    text_of,
    wait_for,
    workbench,
    write_run,
    write_teacher,
)

from kiwb.core.choices import AUTO_ROUTING
from kiwb.launch import cancel_job
from kiwb.project.config import load_config
from kiwb.project.job_specs import IntegrateSpec, ScoreSpec
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import TrainStart
from kiwb.project.store import Store
from kiwb.tui.screens.detail import ConflictDetailScreen
from kiwb.tui.screens.forms import FormScreen
from kiwb.tui.screens.help import HelpScreen
from kiwb.tui.widgets import Plot

SIZE = (100, 32)


@pytest.fixture
def project(tmp_path):
    return synthetic_project(tmp_path / "proj")


def table(app, selector: str) -> DataTable:
    return app.screen.query_one(selector, DataTable)


def choose(form: FormScreen, **values: str) -> None:
    for name, value in values.items():
        form.query_one(f"#field-{name}", Select).value = value


@run_async
async def test_help_lists_the_keys_of_every_pane(project):
    app = workbench(project)   # number keys are pressed in test_tui_imports' visit of every pane
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        assert app.screen.query_one(TabbedContent).active == "conflicts"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = text_of(app.screen.query("Static").last())
        for words in ("Add teacher", "Score", "Export CSV", "Export run", "switch pane"):
            assert words in shown
        keys_column = {line.split("  ")[0].strip() for line in shown.splitlines()}
        assert "q / ctrl+q" in keys_column and "? / f1" in keys_column
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def test_help_names_every_key_the_app_binds():
    """The app's own keys (the footer advertises q) are listed, whatever else changes."""
    from kiwb.tui.app import WorkbenchApp
    from kiwb.tui.screens.help import GLOBAL_KEYS

    listed = {key.strip() for keys, _ in GLOBAL_KEYS for key in keys.split(" / ")}
    bound = {key.strip() for binding in WorkbenchApp.BINDINGS for key in binding.key.split(",")}
    assert bound <= listed and "ctrl+q" in listed


@run_async
async def test_teachers_pane_shows_labels_architecture_size_and_union(project):
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 2, what="two teachers")
        rows = cells(teachers)
        assert rows[0][:5] == ["a", "sports, politics", "Bert", "Bert", "2.0 KB"]
        assert rows[1][:5] == ["b", "music, cooking", "Roberta", "Roberta", "4.0 KB"]
        assert "sports, politics, music, cooking" in text_of(app.screen.query_one("#union"))
        assert "BertForSequenceClassification (bert)" in text_of(app.screen.query_one("#teacher-detail"))


@run_async
async def test_teachers_pane_shows_a_teachers_seen_texts(project):
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace(
        'path = "teachers/a"', 'path = "teachers/a"\nseen = "data/eval.jsonl"'))
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 2, what="two teachers")
        detail = text_of(app.screen.query_one("#teacher-detail"), width=140)
        assert "seen texts (its training texts, for the mahalanobis and knn routings): " \
               "data/eval.jsonl" in " ".join(detail.split())
        teachers.move_cursor(row=1)
        await wait_for(pilot, lambda: "Roberta" in text_of(app.screen.query_one("#teacher-detail")),
                       what="teacher b's detail")
        assert "seen texts" not in text_of(app.screen.query_one("#teacher-detail"), width=140)


@run_async
async def test_adding_a_teacher_validates_in_place_then_writes_kiwb_toml(project):
    write_teacher(project / "teachers" / "c", ("sports", "travel"))
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 2)
        await pilot.press("a")
        form = await fill_form(pilot, name="c", path="teachers/none/here")
        await pilot.press("ctrl+s")
        error = form.query_one("#form-error")
        await wait_for(pilot, lambda: "does not exist" in text_of(error), what="the path error")
        assert app.screen is form                     # still open, the error shown in place
        await fill_form(pilot, path="teachers/c")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: teachers.row_count == 3, what="the new teacher")
        assert [t.name for t in load_config(project).teachers] == ["a", "b", "c"]
        union = text_of(app.screen.query_one("#union"))
        assert "sports*" in union and "shared by several teachers" in union


@run_async
async def test_a_teacher_is_picked_from_the_folder_browser_and_removed_again(project, monkeypatch):
    write_teacher(project / "teachers" / "c", ("sports", "travel"))
    monkeypatch.chdir(project / "teachers")  # the browser starts in the folder kiwb was run from
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 2)
        await pilot.press("a")
        form = await fill_form(pilot, name="c")
        tree = form.query_one(DirectoryTree)
        await wait_for(pilot, lambda: any(str(n.label) == "c" for n in tree.root.children), what="folders")
        tree.select_node(next(node for node in tree.root.children if str(node.label) == "c"))
        path = form.query_one("#field-path", Input)
        await wait_for(pilot, lambda: path.value.endswith("teachers/c"), what="the picked folder")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: teachers.row_count == 3, what="the new teacher")
        assert [t.name for t in load_config(project).teachers] == ["a", "b", "c"]

        teachers.move_cursor(row=0)
        await pilot.press("d")
        assert "Remove teacher a?" in text_of(app.screen.query(Static).first())
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: teachers.row_count == 2, what="the removal")
        assert [t.name for t in load_config(project).teachers] == ["b", "c"]


@run_async
async def test_generic_labels_are_flagged_and_fixed_by_an_override(project):
    write_teacher(project / "teachers" / "g", ("LABEL_0", "LABEL_1"))
    with open(project / "kiwb.toml", "a") as handle:
        handle.write('\n[[teachers]]\nname = "g"\npath = "teachers/g"\n')
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 3)
        assert cells(teachers)[2][-1] == "✗ problem"
        teachers.move_cursor(row=2)
        await pilot.pause()
        assert "generically" in text_of(app.screen.query_one("#teacher-detail"))
        await pilot.press("e")
        await fill_form(pilot, labels="travel, health")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: cells(teachers)[2][-1] == "ok", what="the override")
        assert load_config(project).teacher("g").labels == ("travel", "health")


@run_async
async def test_a_project_folder_without_kiwb_toml_can_be_created(tmp_path):
    app = workbench(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        hint = app.screen.query_one("#teachers-hint")
        await wait_for(pilot, lambda: "press n" in text_of(hint).lower(), what="the hint")
        await pilot.press("n")
        await wait_for(pilot, lambda: "add one" in text_of(hint), what="the new project")
        assert load_config(tmp_path).name == tmp_path.name


@run_async
async def test_data_pane_counts_rows_shows_samples_and_checks_columns(project):
    (project / "data" / "eval.csv").write_text("body,topic\nthe match,sports\nthe vote,politics\n")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        facts = app.screen.query_one("#unlabeled-facts")
        await wait_for(pilot, lambda: "10 rows" in text_of(facts), what="row counts")
        assert "jsonl" in text_of(facts)
        assert cells(table(app, "#unlabeled-samples"))[0] == ["the striker scored a late goal to win the derby"]
        assert "music 3" in text_of(app.screen.query_one("#eval-facts"))
        await pilot.press("v")
        form = await fill_form(pilot, path="data/eval.csv", label_column="label")
        await pilot.press("ctrl+s")   # the loader accepts it; the pane then names the bad column
        await wait_for(pilot, lambda: app.screen is not form)
        eval_facts = app.screen.query_one("#eval-facts")
        await wait_for(pilot, lambda: "no column 'text'" in text_of(eval_facts), what="the problem")
        await pilot.press("v")
        await fill_form(pilot, path="data/eval.csv", text_column="body", label_column="topic")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "2 rows" in text_of(eval_facts), what="the fixed columns")
        assert cells(table(app, "#eval-samples"))[1] == ["the vote", "politics"]


@run_async
async def test_jobs_pane_follows_jobs_started_elsewhere_and_explains_failures(project):
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        jobs = table(app, "#jobs-table")
        # every set saved: one line per teacher, the job's detail below keeps its room
        saved = text_of(app.screen.query_one("#score-sets"))
        assert "scores saved, per teacher ✓" in saved
        assert "a · unlabeled 10 texts" in saved and "b · unlabeled 10 texts" in saved
        with Store(ProjectPaths(project).store) as store:   # another process launches jobs
            running = store.jobs.create("score", "scores", {})
            store.jobs.started(running, {"device": "cpu"})
            store.jobs.beat(running)
            store.jobs.record_progress(running, {"done": 30, "total": 120, "unit": "texts",
                                                 "rate": 15.0, "eta_s": 6.0, "label": "a"})
            failed = store.jobs.create("train", "muki-hard", {"run": "muki-hard"})
            store.jobs.started(failed, {"device": "cpu"})
        app.screen.refresh_now()   # rather than wait for the next poll
        await wait_for(pilot, lambda: jobs.row_count == 2, what="the jobs")
        first = cells(jobs)[0]
        assert first[1:6] == ["score", "running", "30/120 texts", "15.0/s", "ETA 0m 06s"]
        with Store(ProjectPaths(project).store) as store:
            store.jobs.end(failed, "failed", {"error": "no complete teacher scores yet; run: kiwb score",
                                              "log_tail": ["kiwb: error: no complete teacher scores"]})
        app.screen.refresh_now()
        await wait_for(pilot, lambda: cells(jobs)[1][2] == "failed", what="the failure")
        await wait_for(pilot, lambda: any("Job failed" in n and "run: kiwb score" in n
                                          for n in notifications), what="a notification")
        jobs.move_cursor(row=1)
        log = app.screen.query_one("#job-log")
        await wait_for(pilot, lambda: "run: kiwb score" in text_of(log), what="the error in the log")


@run_async
async def test_jobs_pane_shows_each_rank_of_a_distributed_job_and_the_one_that_died(project):
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        jobs = table(app, "#jobs-table")
        with Store(ProjectPaths(project).store) as store:  # as a rank 0 records it
            job = store.jobs.create("score", "scores", {"devices": "cuda:0,cuda:1"})
            store.jobs.started(job, {"device": "cuda:0"})
            ranks = [{"rank": 0, "device": "cuda:0", "host": "gpu-1", "pid": 11, "texts": 4096},
                     {"rank": 1, "device": "cuda:1", "host": "gpu-1", "pid": 12, "texts": 2048}]
            store.jobs.record_progress(job, {"done": 6144, "total": 20000, "unit": "texts",
                                             "rate": 900.0, "eta_s": 15.3, "label": "a",
                                             "ranks": ranks})
            store.jobs.end(job, "lost", {"error": "rank 1 (cuda:1) died (killed by SIGKILL)",
                                         "log_tail": ["rank 1: scored a · unlabeled shard 3"]})
        app.screen.refresh_now()
        await wait_for(pilot, lambda: any(row[2] == "lost" for row in cells(jobs)), what="the job")
        jobs.move_cursor(row=next(number for number, row in enumerate(cells(jobs))
                                  if row[2] == "lost"))
        log = app.screen.query_one("#job-log")
        await wait_for(pilot, lambda: "rank 1 cuda:1 on gpu-1 · pid 12 · 2,048 texts"
                       in text_of(log), what="the ranks")
        shown = text_of(log)
        assert "rank 0 cuda:0 on gpu-1 · pid 11 · 4,096 texts" in shown
        assert "rank 1 (cuda:1) died (killed by SIGKILL)" in shown
        assert "rank 1: scored a · unlabeled shard 3" in shown


def last_job_cancelled(project: Path):
    """The job a form started last, cancelled: its worker need not run on the synthetic
    project's scores and teachers."""
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
        cancel_job(store, job.id)
    return job


@run_async
async def test_a_form_submitted_twice_quickly_starts_one_job(project):
    from kiwb.tui.launcher import cancel

    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3", "s")
        form = await fill_form(pilot, wait=("representations",))
        # A busy store (a job writing) holds the launch, so the second press lands during it.
        with Store(ProjectPaths(project).store) as busy, busy.transaction():
            await pilot.press("ctrl+s", "ctrl+s")
            assert form.query_one("#form-ok").disabled and not form.check_action("submit", ())
        await wait_for(pilot, lambda: app.screen is not form, what="the form to close")
        await pilot.pause(0.5)                      # time for a second launch to be recorded
        with Store(ProjectPaths(project).store) as store:
            jobs = store.jobs.all()
        assert len(jobs) == 1, [job.label for job in jobs]
        assert any("started job 1" in note for note in notifications), notifications
    for _ in range(2):   # its placeholder teachers would fail it; a second cancel ends it at once
        cancel(project, jobs[0].id)


@run_async
async def test_the_train_form_launches_with_the_routing_picked(project):
    from kiwb.tui.launcher import cancel

    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3", "t")
        form = await fill_form(pilot, student="students/base", min_steps="many")
        # kiwb.toml's: auto, which single-label teachers choose per project as they integrate
        assert form.query_one("#field-routing", Select).value == AUTO_ROUTING
        assert form.query_one("#field-min_steps", Input).value == "many"
        choose(form, routing="class-rank")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: 'the train form: min_steps must be an integer, got "many"'
                       in text_of(form.query_one("#form-error")),
                       what="the bad minimum refused in place")
        form.query_one("#field-min_steps", Input).value = "50"
        form.query_one("#field-devices", Input).value = "cpu,,all"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "give a comma list of devices" in text_of(
            form.query_one("#form-error")), what="the bad device list refused in place")
        form.query_one("#field-devices", Input).value = "cpu,cpu"
        form.query_one("#field-device", Input).value = "gpu"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "the train form: device must be auto, cpu, cuda" in text_of(
            form.query_one("#form-error")), what="the misspelt device refused in place")
        form.query_one("#field-device", Input).value = "auto"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not form, what="the form to close")
        with Store(ProjectPaths(project).store) as store:
            jobs = store.jobs.all()
    assert [(job.kind, job.settings["run"], job.settings["routing"], job.settings["min_steps"],
             job.settings["devices"]) for job in jobs] == [
        ("train", "muki-hard-class-rank", "class-rank", 50, "cpu,cpu")]
    for _ in range(2):   # its placeholder teachers would fail it; a second cancel ends it at once
        cancel(project, jobs[0].id)


@run_async
async def test_few_label_routing_without_a_labeled_set_is_refused_in_the_forms(project):
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        for key, values in (("t", {"student": "students/base"}), ("i", {})):
            routing = "stacked"
            await pilot.press("3", key)
            form = await fill_form(pilot, **values)
            assert form.query_one("#field-method", Select).value == "muki-hard"
            choose(form, routing=routing)
            await pilot.press("ctrl+s")
            error = form.query_one("#form-error", Static)
            await wait_for(pilot, lambda error=error: "[data.labeled]" in text_of(error),
                           what="the refusal")
            message = text_of(error, width=400).strip()
            assert f'routing "{routing}" needs a few labeled texts' in message
            assert "choose a label-free routing (confidence, rank, class-rank, mahalanobis" in message
            assert "\n" not in message and app.screen is form
            await pilot.press("escape")
        with Store(ProjectPaths(project).store) as store:
            assert store.jobs.all() == []


@run_async
async def test_the_integrate_form_starts_an_integration_job_with_its_method_and_routing(project):
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3", "i")
        form = await fill_form(pilot, wait=("routing",))
        assert form.query_one("#field-routing", Select).value == AUTO_ROUTING
        choose(form, method="uhc", routing="confidence")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("Job started" in n for n in notifications),
                       what="the integration job")
    job = last_job_cancelled(project)
    assert job.kind == "integrate" and job.label == "integrate"
    # what the form changed, as `kiwb integrate --method uhc --routing confidence` gives it
    assert job.spec == IntegrateSpec(method="uhc", routing="confidence")


@run_async
async def test_the_job_detail_follows_the_job_just_launched(project):
    with Store(ProjectPaths(project).store) as store:
        first = store.jobs.create("score", "score", ScoreSpec().settings())
        store.jobs.end(first, "finished", {"texts": 10})
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        log = app.screen.query_one("#job-log")
        await wait_for(pilot, lambda: text_of(log).startswith(f"job {first} · score"),
                       what="the first job's detail")
        await pilot.press("i")
        await fill_form(pilot, wait=("routing",))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("Job started" in n for n in notifications),
                       what="the integration job")
        await wait_for(pilot, lambda: text_of(log).startswith(f"job {first + 1} · integrate"),
                       what="the launched job's detail")
    last_job_cancelled(project)


@run_async
async def test_the_setting_forms_count_the_labels_given_in_the_conflicts_pane(project):
    from kiwb.project.labels import give_labels

    with Store(ProjectPaths(project).store) as store:
        give_labels(store.connection, [("first text", "sports"), ("second text", "music")])
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await wait_for(pilot, lambda: app.screen.query_one("JobsPane").given_labels == 2,
                       what="the store's count")
        for key in ("i", "t"):  # the integrate and the train form
            await pilot.press(key)
            form = await fill_form(pilot, wait=("labels",))
            assert (str(form.query_one("#field-labels", Checkbox).label) ==
                    "use those given in Conflicts (6): 2 given")
            await pilot.press("escape")


@run_async
async def test_enter_submits_the_score_form_as_it_opens(project):
    """`s` opens the form with its first field focused; Enter there starts the job."""
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3", "s")
        form = await fill_form(pilot, wait=("mc_passes",))
        assert app.focused is form.query_one("#field-mc_passes")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Job started" in n for n in notifications),
                       what="the score job")
    assert last_job_cancelled(project).kind == "score"


@run_async
async def test_the_score_form_asks_for_representations_of_scores_made_without(project):
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3", "s")
        form = await fill_form(pilot, wait=("representations",))
        asked = form.query_one("#field-representations", Checkbox)
        assert asked.value is False
        asked.value = True
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("Job started" in n for n in notifications),
                       what="the score job")
    job = last_job_cancelled(project)
    assert job.kind == "score" and job.spec == ScoreSpec(representations=True)


@run_async
async def test_the_score_form_sets_the_dropout_the_passes_draw_with(project):
    """Checked as kiwb.toml checks it (refused in place), then saved there for the job."""
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3", "s")
        form = await fill_form(pilot, dropout="1.5")
        assert load_config(project).scoring.dropout == "auto"  # the default, shown to change
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "the score form: dropout must be >= 0 and < 1" in text_of(
            form.query_one("#form-error")), what="the rate refused in place")
        form.query_one("#field-dropout").value = "0.2"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("Job started" in n for n in notifications),
                       what="the score job")
    last_job_cancelled(project)
    assert load_config(project).scoring.dropout == 0.2


@run_async
async def test_a_finished_integration_job_says_what_the_integration_did(project):
    with Store(ProjectPaths(project).store) as store:
        job_id = store.jobs.create("integrate", "integration", IntegrateSpec().settings())
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await wait_for(pilot, lambda: table(app, "#jobs-table").row_count == 1, what="the job")
        with Store(ProjectPaths(project).store) as store:
            store.jobs.end(job_id, "finished", {"integration": INTEGRATION_KEY})
        await wait_for(pilot, lambda: any("Integration done" in n for n in notifications),
                       what="the integration note")
    done = next(n for n in notifications if "Integration done" in n)
    assert "integrated 10 texts with mixture routing (a won 5, b won 5)" in done


@run_async
async def test_jobs_table_widens_its_columns_as_a_job_goes_from_queued_to_finished(project):
    app = workbench(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        jobs = table(app, "#jobs-table")
        with Store(ProjectPaths(project).store) as store:  # as the launcher records a job
            score = store.jobs.create("score", "scores", {})
        app.screen.refresh_now()
        await wait_for(pilot, lambda: drawn_cells(jobs)[1:] == [
            [str(score), "score", "queued", "", "", "", ""]], what="the queued job")
        with Store(ProjectPaths(project).store) as store:   # its worker runs it, then ends it
            store.jobs.started(score, {"device": "cpu"})
            store.jobs.record_progress(score, {"done": 3200, "total": 3200, "unit": "texts",
                                               "rate": 50.0, "eta_s": 0.0, "label": "a"})
            store.jobs.end(score, "finished", {"texts": 3200})
            store.connection.execute("UPDATE jobs SET started_at=?, ended_at=? WHERE id=?",
                                     (JOB_CLOCK, JOB_CLOCK + 187, score))
            integrate = store.jobs.create("integrate", "integration", IntegrateSpec().settings())
        app.screen.refresh_now()
        finished = [str(score), "score", "finished", "3,200/3,200 texts", "", "3m 07s", "cpu"]
        await wait_for(pilot, lambda: drawn_cells(jobs)[1:] == [
            finished, [str(integrate), "integrate", "queued", "", "", "", ""]],
            what="the finished job's cells whole")
        assert drawn_cells(jobs)[0] == ["job", "kind", "status", "progress", "rate", "time",
                                        "device"]
        with Store(ProjectPaths(project).store) as store:
            store.jobs.started(integrate, {"device": "cpu"})
            store.jobs.end(integrate, "finished", {"integration": INTEGRATION_KEY})
            store.connection.execute("UPDATE jobs SET started_at=?, ended_at=? WHERE id=?",
                                     (JOB_CLOCK, JOB_CLOCK + 5, integrate))
        app.screen.refresh_now()
        await wait_for(pilot, lambda: drawn_cells(jobs)[1:] == [
            finished, [str(integrate), "integrate", "finished", "", "", "0m 05s", "cpu"]],
            what="the integration's cells whole")


@run_async
async def test_uncertainty_pane_is_live(tmp_path):
    project = synthetic_project(tmp_path / "proj", scored=False, trained=False)
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        plot = app.screen.query_one("#teacher-confidence", Plot)
        await wait_for(pilot, lambda: "No scores yet" in text_of(plot))
        from tui_support import write_integration, write_scores

        with Store(ProjectPaths(project).store) as store:     # a scoring job finishes shards
            arrays = write_scores(project, store)
        app.screen.refresh_now()
        await wait_for(pilot, lambda: "b · MC dropout · 10 texts" in text_of(plot), what="histograms")
        assert "a · MC dropout · 10 texts" in text_of(plot) and "█" in text_of(plot)
        margins = app.screen.query_one("#margins", Plot)
        split = app.screen.query_one("#routing-split", Plot)
        assert "No integration yet" in text_of(margins)
        assert "After integrating (Jobs, i): which texts the routing gave" in text_of(split)
        with Store(ProjectPaths(project).store) as store:
            write_integration(store, arrays)
        app.screen.refresh_now()
        await wait_for(pilot, lambda: "are conflicts" in text_of(margins))
        assert "0.3: 8 of 10 texts (80.0%)" in text_of(margins)
        routing = text_of(app.screen.query_one("#routing", Plot))
        assert "routing accuracy: mixture 80.0% · MC dropout 90.0% · plain confidence 60.0%" in routing
        shown = text_of(split)
        assert shown.startswith("Routing · mixture: each teacher's MC confidence, to it vs elsewhere")
        assert "a: won 5 (50%) · est. in its labels 50% · split 0.62" in shown
        assert "b: won 5 (50%) · est. in its labels 45% · split 0.41" in shown
        assert "┊" in shown and "calibration" not in shown     # no labeled set, no calibration


@run_async
async def test_uncertainty_pane_says_whose_mc_passes_were_not_their_own(tmp_path):
    """Teacher a was given kiwb's dropout, teacher b has none acting: beside each one's MC
    histogram while scoring, and under the integration's MC-vs-plain plot."""
    from tui_support import SCORE_KEYS, write_integration, write_scores

    project = synthetic_project(tmp_path / "proj", scored=False, trained=False)
    with Store(ProjectPaths(project).store) as store:
        arrays = write_scores(project, store)
        store.add_score_meta(SCORE_KEYS["a"], {"dropout_acts": True, "dropout": 0.1})
        store.add_score_meta(SCORE_KEYS["b"], {"dropout_acts": False})
        write_integration(store, arrays)  # records what the two score sets said
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        plot = app.screen.query_one("#teacher-confidence", Plot)
        await wait_for(pilot, lambda: "b · MC dropout none" in text_of(plot, width=120),
                       what="histograms")
        shown = text_of(plot, width=120)
        assert "a · MC dropout 0.1 set by kiwb · 10 texts" in shown
        assert "b · MC dropout none: = plain · 10 texts" in shown
        routing = text_of(app.screen.query_one("#routing", Plot), width=120)
        assert "teacher a's MC passes: dropout 0.1 set by kiwb" in routing
        assert "teacher b's MC passes: no dropout acts: MC = plain" in routing


@run_async
async def test_uncertainty_pane_shows_each_teachers_calibration_under_stacked_routing(tmp_path):
    project = synthetic_project(tmp_path / "proj", integrated=False, trained=False)
    summary = routed(integration_summary([0.1] * 4 + [0.5] * 6), "stacked",
                     a={"calibration_error": 0.08, "labeled_own": 30},
                     b={"share": None, "calibration_error": 0.21, "labeled_own": 12})
    with Store(ProjectPaths(project).store) as store:
        record_integration(store, "stacked", summary)
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        split = app.screen.query_one("#routing-split", Plot)
        await wait_for(pilot, lambda: "Routing · stacked" in text_of(split), what="the routing")
        lines = text_of(split).splitlines()
        assert lines[1].split() == ["a", "b"]                   # a histogram per teacher
        assert ("a: won 5 (50%) · est. in its labels 50% · split 0.62 · calibration error "
                "0.08") in lines
        assert "b: won 5 (50%) · split 0.41 · calibration error 0.21" in lines


@run_async
async def test_uncertainty_pane_shows_a_representation_routings_own_score(tmp_path):
    project = synthetic_project(tmp_path / "proj", integrated=False, trained=False)
    summary = routed(integration_summary([0.1] * 4 + [0.5] * 6), "mahalanobis",
                     score="Mahalanobis quantile",
                     a={"share": None, "reference": "seen: 60 of its training texts"},
                     b={"share": None, "reference": "seeded, then refitted on the 5 pool texts "
                                                    "routed to it"})
    with Store(ProjectPaths(project).store) as store:
        record_integration(store, "mahalanobis", summary)
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        split = app.screen.query_one("#routing-split", Plot)
        await wait_for(pilot, lambda: "Routing · mahalanobis" in text_of(split), what="the routing")
        shown = text_of(split, width=120)
        assert "each teacher's Mahalanobis quantile, to it vs elsewhere" in shown
        assert "a: won 5 (50%) · split 0.62 · seen: 60 of its training texts" in shown
        assert "b: won 5 (50%) · split 0.41 · seeded, then refitted on the 5 pool texts" in shown


@run_async
async def test_accuracy_pane_compares_runs_and_shows_one_in_detail(project):
    with Store(ProjectPaths(project).store) as store:
        write_run(project, store, run="vanilla-kd", method="vanilla-kd", accuracies=(0.4, 0.45),
                  routing=None, fit=None)   # as an older kiwb recorded it
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        runs = table(app, "#runs-table")
        await wait_for(pilot, lambda: runs.row_count == 5, what="two runs and three baselines")
        rows = cells(runs)
        assert rows[0] == ["muki-hard", "done", "75.0%", "75.0% @20", "70.0%", "96.0%",
                           "mixture 85.0%"]
        assert rows[1][:4] == ["vanilla-kd", "done", "45.0%", "45.0% @20"]
        assert rows[1][5:] == ["–", "90.0% / 60.0%"]  # no fit recorded by an older kiwb
        assert rows[2][:3] == ["ensemble", "untrained", "55.0%"]
        assert rows[2][5:] == ["", "mixture 80.0%"]
        assert [row[0] for row in rows[3:]] == ["a alone", "b alone"]
        curves = text_of(app.screen.query_one("#curves", Plot))
        assert "muki-hard · step 20/20" in curves and "muki-hard · muki-hard" not in curves
        per_class = text_of(app.screen.query_one("#per-class", Plot))
        assert "sports" in per_class and "100.0%" in per_class and "–" in per_class
        assert "loss 0.750 → 0.075" in text_of(app.screen.query_one("#curves", Plot))
        assert "gold \\ pred" in text_of(app.screen.query_one("#confusion"))
        runs.move_cursor(row=1)
        await pilot.pause()
        assert "music" in text_of(app.screen.query_one("#per-class", Plot))
        assert "45.0%" in text_of(app.screen.query_one("#per-class", Plot))
        assert not app.screen.query_one("#check").display  # nothing wrong, nothing said


@run_async
async def test_accuracy_pane_opens_on_the_best_run_and_keeps_the_users_pick(tmp_path):
    """A baseline trained first (the demo's vanilla-kd) is not what the pane opens on: the
    cursor follows the best run until the user moves it, then stays where they put it."""
    project = synthetic_project(tmp_path / "proj", trained=False)
    with Store(ProjectPaths(project).store) as store:
        write_run(project, store, run="vanilla-kd", method="vanilla-kd", accuracies=(0.3, 0.35))
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        runs = table(app, "#runs-table")
        curves = app.screen.query_one("#curves", Plot)
        await wait_for(pilot, lambda: "vanilla-kd" in text_of(curves), what="the one run")
        with Store(ProjectPaths(project).store) as store:  # a better run ends while it is open
            write_run(project, store, run="muki-hard", accuracies=(0.5, 0.75))
        app.screen.refresh_now()
        await wait_for(pilot, lambda: "muki-hard · step" in text_of(curves), what="the best run")
        assert cells(runs)[runs.cursor_row][0] == "muki-hard"
        runs.move_cursor(row=[row[0] for row in cells(runs)].index("vanilla-kd"))  # the user's
        await pilot.pause()
        with Store(ProjectPaths(project).store) as store:
            write_run(project, store, run="muki-soft", method="muki-soft", accuracies=(0.6, 0.8))
        app.screen.refresh_now()
        await wait_for(pilot, lambda: "muki-soft" in [row[0] for row in cells(runs)],
                       what="the third run")
        await pilot.pause()
        assert cells(runs)[runs.cursor_row][0] == "vanilla-kd"
        assert "vanilla-kd" in text_of(curves)
    app = workbench(project)  # opened again: on the best of the three
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        runs = table(app, "#runs-table")
        await wait_for(pilot, lambda: runs.row_count == 6, what="three runs and three baselines")
        await pilot.pause()
        assert [row[0] for row in cells(runs)][:3] == ["vanilla-kd", "muki-hard", "muki-soft"]
        assert cells(runs)[runs.cursor_row][0] == "muki-soft"
        assert "muki-soft · step 20/20" in text_of(app.screen.query_one("#curves", Plot))


@run_async
async def test_accuracy_runs_table_widens_its_columns_as_a_run_is_evaluated(tmp_path):
    project = synthetic_project(tmp_path / "proj", integrated=False, trained=False)
    with Store(ProjectPaths(project).store) as store:   # the run has just started
        store.append_event(TrainStart.kind, TrainStart(step=0, total_steps=20,
                                                       method="muki-hard").to_dict(), run="muki-hard")
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        runs = table(app, "#runs-table")
        await wait_for(pilot, lambda: drawn_cells(runs)[1:] == [
            ["muki-hard", "running 0%", "–", "–", "–", "–", "–"]], what="the running run")
        with Store(ProjectPaths(project).store) as store:
            write_run(project, store)   # its steps, evaluations and end
        app.screen.refresh_now()
        await wait_for(pilot, lambda: drawn_cells(runs)[1:] == [
            ["muki-hard", "done", "75.0%", "75.0% @20", "70.0%", "96.0%",
             "mixture 85.0%"]],
            what="the evaluated run's cells whole")


@run_async
async def test_accuracy_pane_marks_a_student_that_has_not_learned(project):
    with Store(ProjectPaths(project).store) as store:  # every text taken for sports
        write_run(project, store, run="collapsed", accuracies=(0.3, 0.3), fit=0.4,
                  confusion=[[5, 0, 0, 0], [5, 0, 0, 0], [5, 0, 0, 0], [0, 0, 0, 0]])
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        runs = table(app, "#runs-table")
        await wait_for(pilot, lambda: "collapsed" in [row[0] for row in cells(runs)], what="the run")
        row = next(row for row in cells(runs) if row[0] == "collapsed")
        assert row[1] == "done ⚠"  # 80 columns hold the mark; the line below says what it is
        runs.move_cursor(row=[r[0] for r in cells(runs)].index("collapsed"))
        await pilot.pause()
        shown = text_of(app.screen.query_one("#check"))
        assert app.screen.query_one("#check").display
        assert "has collapsed classes: never predicts politics, music" in shown
        assert "[training] min_steps" in shown and "at the kept checkpoint" in shown
        assert "it does not fit its targets (40.0% on the pool texts it trained on)" in shown


@pytest.mark.slow
@run_async
async def test_conflicts_pane_filters_pages_details_and_exports(project):
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        conflicts = table(app, "#conflicts-table")
        status = app.screen.query_one("#conflict-status")
        await wait_for(pilot, lambda: "8 texts under margin 0.3" in text_of(status), what="the count")
        margins = [float(row[0]) for row in cells(conflicts)]
        assert len(margins) == 8 and margins == sorted(margins)
        app.screen.query_one("#conflict-margin", Input).value = ""
        await wait_for(pilot, lambda: conflicts.row_count == 10, what="every text")
        everything = cells(conflicts)
        app.screen.query_one("#conflict-teacher", Select).value = 0
        await wait_for(pilot, lambda: {row[1] for row in cells(conflicts)} == {"a"}, what="teacher a")
        classes = app.screen.query_one("#conflict-class", Select)
        classes.value = UNION.index("music")        # with teacher a: nothing a routes is music
        await wait_for(pilot, lambda: "0 texts in all" in text_of(status), what="no a-music texts")
        assert conflicts.row_count == 0
        app.screen.query_one("#conflict-teacher", Select).clear()
        music = [row for row in everything if row[2] == "music"]
        assert 0 < len(music) < len(everything)
        await wait_for(pilot, lambda: cells(conflicts) == music, what="the music texts alone")
        assert f"{len(music)} texts in all" in text_of(status)
        classes.clear()
        await wait_for(pilot, lambda: cells(conflicts) == everything, what="every class again")
        conflicts.focus()  # "/" searches from the list (in a text box it is just a character)
        await pilot.pause()
        await pilot.press("slash")
        search = app.screen.query_one("#conflict-search", Input)
        await wait_for(pilot, lambda: search.has_focus, what="the search box to take focus")
        # Set the text in one go: typed keys race the pilot's focus change on a loaded machine.
        search.value = "chef"
        await wait_for(pilot, lambda: conflicts.row_count == 1 and "chef" in cells(conflicts)[0][5],
                       what="the search")
        app.screen.query_one("#conflict-search", Input).value = ""
        app.screen.query_one("#conflict-margin", Input).value = "abc"
        await wait_for(pilot, lambda: "is not a number" in text_of(status), what="the margin error")
        app.screen.query_one("#conflict-margin", Input).value = "0.3"
        await wait_for(pilot, lambda: conflicts.row_count == 8)
        conflicts.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConflictDetailScreen), what="details")
        detail = app.screen
        plots = [text_of(plot) for plot in detail.query(Plot)]
        assert len(plots) == 2 and any("won" in p for p in plots)
        assert "sports" in plots[0] and "cooking" in plots[1] and "confidence MC" in plots[0]
        await pilot.press("escape")
        await pilot.press("x")
        written = ProjectPaths(project).exports / f"conflicts-{INTEGRATION_KEY[:8]}.csv"
        await wait_for(pilot, written.exists, what="the CSV")
        with open(written, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 8 and {"confidence_a", "confidence_b", "text"} <= set(rows[0])
        assert [float(r["margin"]) for r in rows] == pytest.approx(margins, abs=1e-3)


@run_async
async def test_export_pane_lists_runs_checkpoints_and_how_to_load(project):
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        runs = table(app, "#export-runs")
        await wait_for(pilot, lambda: runs.row_count == 1, what="the run")
        assert cells(runs)[0] == ["muki-hard", "muki-hard", "2", "20", "75.0%"]
        options = [value for _, value in app.screen.query_one("#export-checkpoint", Select)._options]
        assert {"best", "last", "step-0000020", "step-0000010"} <= set(options)
        how = text_of(app.screen.query_one("#export-how"), width=400)  # a path on one line
        assert 'pipeline("text-classification"' in how and "exports/muki-hard" in how
        app.screen.query_one("#export-destination", Input).value = str(project / "out")
        app.screen.query_one(DataTable).focus()
        await pilot.pause()
        assert str(project / "out") in text_of(app.screen.query_one("#export-how"), width=200)


@run_async
async def test_the_export_panes_hub_upload_is_checked_before_a_job_starts(project):
    """A repository that is not ORG/NAME is refused as `kiwb export --push-to-hub` refuses it,
    before any job is recorded."""
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_for(pilot, lambda: table(app, "#export-runs").row_count == 1, what="the run")
        app.screen.query_one("#export-hub", Input).value = "student"
        app.screen.query_one("#export-private", Checkbox).value = True
        await pilot.click("#export-go")
        await wait_for(pilot, lambda: any("give a model repository as ORG/NAME" in n
                                          for n in notifications), what="the refusal")
    with Store(ProjectPaths(project).store) as store:
        assert [job for job in store.jobs.all() if job.kind == "export"] == []


@run_async
async def test_export_runs_table_widens_its_columns_as_a_run_writes_its_files(tmp_path):
    project = synthetic_project(tmp_path / "proj", trained=False)
    first = ProjectPaths(project).run_dir("muki-hard") / "checkpoints" / "step-0000010"
    first.mkdir(parents=True)   # a first checkpoint being written, before the manifest
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        runs = table(app, "#export-runs")
        await wait_for(pilot, lambda: drawn_cells(runs)[1:] == [["muki-hard", "", "1", "–", "–"]],
                       what="the run in training")
        with Store(ProjectPaths(project).store) as store:
            write_run(project, store)   # its evaluations, then its files
        app.screen.refresh_now()
        await wait_for(pilot, lambda: drawn_cells(runs)[1:] == [
            ["muki-hard", "muki-hard", "2", "20", "75.0%"]], what="the finished run's cells whole")


@pytest.mark.slow
@run_async
async def test_theme_switch_from_the_command_palette_is_remembered(project, tmp_path):
    memory = tmp_path / "config" / "workbench.toml"
    app = workbench(project, theme=None, theme_memory=memory)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == _default_theme(app)
        await pilot.pause()
        assert not memory.exists(), "starting is not picking"
        before = app.screen.query_one("#teacher-confidence", Plot).styles_for_plots().bar
        await pilot.press("ctrl+p")
        await pilot.press(*"theme")
        await pilot.press("enter")
        await pilot.pause(0.2)
        await pilot.press(*"kiwb-light")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.theme == "kiwb-light", what="the light theme")
        after = app.screen.query_one("#teacher-confidence", Plot).styles_for_plots().bar
        assert after.color != before.color
        await wait_for(pilot, memory.exists, what="the theme to be remembered")

    again = workbench(project, theme=None, theme_memory=memory)
    async with again.run_test(size=SIZE):
        assert again.theme == "kiwb-light"
    once = workbench(project, theme="kiwb-ansi", theme_memory=memory)  # --theme: this session only
    async with once.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert once.theme == "kiwb-ansi"
    assert 'theme = "kiwb-light"' in memory.read_text()


@run_async
async def test_an_unreadable_theme_memory_is_reported_and_the_default_used(project, tmp_path):
    memory = tmp_path / "workbench.toml"
    memory.write_text("theme = [1, 2")
    app = workbench(project, theme=None, theme_memory=memory)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: notifications, what="the note")
        assert str(memory) in notifications[0] and app.theme == _default_theme(app)


def _default_theme(app) -> str:
    """kiwb-dark, or kiwb-ansi where the test terminal reports 16 colours."""
    from kiwb.tui.themes import choose_theme

    return choose_theme(None, set(app.available_themes), app.console.color_system)[0]


@run_async
async def test_a_broken_theme_file_is_reported_by_name(project, tmp_path):
    from kiwb.tui.themes import package_themes_folder

    user_themes = tmp_path / "themes"
    user_themes.mkdir()
    (user_themes / "mine.toml").write_text('name = "mine"\nprimary = 12\n')
    app = workbench(project, theme_folders=[package_themes_folder(), user_themes])
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: notifications, what="the theme problem")
        assert "mine.toml" in notifications[0] and "primary" in notifications[0]
        assert app.theme == "kiwb-dark"


@run_async
async def test_a_theme_of_few_colours_is_chosen_for_a_16_colour_terminal(project, monkeypatch):
    from kiwb.tui import themes

    monkeypatch.setattr(themes, "few_colours", lambda system: True)
    app = workbench(project, theme=None)
    async with app.run_test(size=SIZE):
        assert app.theme == "kiwb-ansi" and app.current_theme.ansi


@run_async
async def test_a_broken_kiwb_toml_is_explained_and_read_again_once_fixed(project):
    good = (project / "kiwb.toml").read_text()
    (project / "kiwb.toml").write_text(good.replace("[scoring]", "[scoring]\nmc_pases = 4", 1))
    app = workbench(project)
    async with app.run_test(size=SIZE) as pilot:
        hint = app.screen.query_one("#teachers-hint")
        await wait_for(pilot, lambda: "mc_pases" in text_of(hint), what="the config error")
        assert 'did you mean "mc_passes"' in text_of(hint) and "reads it again" in text_of(hint)
        await pilot.press("3", "s")
        assert not isinstance(app.screen, FormScreen)      # nothing launches on a broken config
        (project / "kiwb.toml").write_text(good)
        app.screen.refresh_now()
        await pilot.press("1")
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 2 and not text_of(hint), what="the reload")


@run_async
async def test_a_vanished_teacher_folder_is_shown_in_place_and_the_teacher_removed(project):
    """kiwb.toml naming a folder that is gone still opens: the Teachers pane says what is
    missing, jobs are refused with that line, and the teacher can be removed there."""
    import shutil

    text = (project / "kiwb.toml").read_text()
    (project / "kiwb.toml").write_text(text.replace('path = "teachers/b"',
                                                    f'path = "{project / "teachers" / "b"}"'))
    shutil.rmtree(project / "teachers" / "b")
    app = workbench(project)
    notifications = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        teachers = table(app, "#teachers-table")
        await wait_for(pilot, lambda: teachers.row_count == 2, what="both teachers")
        hint = text_of(app.screen.query_one("#teachers-hint"))
        assert "teachers[2].path" in hint and "teachers/b does not exist" in hint
        await pilot.press("3", "s")
        await wait_for(pilot, lambda: any("teachers/b does not exist" in n for n in notifications),
                       what="the refused job")
        await pilot.press("1")
        teachers.move_cursor(row=1)
        await pilot.press("d")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: teachers.row_count == 1, what="the removal")
        assert text_of(app.screen.query_one("#teachers-hint")) != hint
    assert [t.name for t in load_config(project).teachers] == ["a"]
    with Store(ProjectPaths(project).store) as store:
        assert [job.kind for job in store.jobs.all()] == []


def test_the_teachers_pane_says_a_heads_kind_as_the_checkpoint_reads():
    """A multi-label head is a *ForSequenceClassification class too: its problem_type, read into
    the teacher's kind, says multi-label, not the first kind sharing the class's suffix."""
    from kiwb.tui.inspect import TeacherSummary
    from kiwb.tui.panes.teachers import short_architecture

    def shown(architecture: str, kind: str) -> str:
        return short_architecture(TeacherSummary("t", "p", architecture=architecture, kind=kind))

    assert shown("BertForSequenceClassification", "sequence") == "Bert"
    assert shown("BertForSequenceClassification", "multi-label") == "Bert (multi-label)"
    assert shown("RobertaForTokenClassification", "token") == "Roberta (NER)"
    assert shown("BertForTokenClassification", "sequence") == "BertForTokenClassification"
    assert shown("", "sequence") == "–"
