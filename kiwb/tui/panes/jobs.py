"""Jobs: launch scoring, training and integration; watch progress, rate and ETA; cancel; logs."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kiwb.core.choices import (
    DEFAULT_MERGE_METHOD,
    MERGE_METHODS,
    SUPERVISED,
)
from kiwb.errors import ConfigError
from kiwb.kinds import kind_named
from kiwb.project import setting_form
from kiwb.project.config import ProjectConfig
from kiwb.project.config_checks import checked_setting
from kiwb.project.config_schema import ScoringConfig
from kiwb.project.head_clash import head_clash_lines
from kiwb.project.job_specs import (
    IntegrateSpec,
    MergeSpec,
    ScoreSpec,
    TrainSpec,
)
from kiwb.project.jobs import JobState, format_duration, rank_lines, read_log_tail
from kiwb.project.queries import ScoreSetProgress, StoreChanges, recorded_integration
from kiwb.project.records import IntegrationSummary
from kiwb.project.shards import REPRESENTATION_SUFFIX
from kiwb.project.teacher_kinds import LoadedProject
from kiwb.tui import config_edit, launcher
from kiwb.tui.background import run_in_thread
from kiwb.tui.messages import ActionDone, IntegrationDone, JobLog
from kiwb.tui.panes.base import Pane
from kiwb.tui.plots import hbar
from kiwb.tui.screens.forms import Field, FormScreen
from kiwb.tui.widgets import Table, show, sync_rows

NEXT_STEP = {"score": "press i to integrate, then look at Uncertainty (4) and Conflicts (6)",
             "integrate": "see Uncertainty (4) and Conflicts (6)",
             "train": "see Accuracy (5); export it from Export (7)",
             "export": "see Export (7) for how to load it",
             "merge": "see Accuracy (5) beside the students; export it from Export (7)"}
STATUS_STYLE = {"running": "bold", "queued": "dim", "cancelling": "yellow", "finished": "green",
                "failed": "bold red", "lost": "red", "cancelled": "yellow", "stalled": "bold yellow"}


class JobsPane(Pane):
    """Every job of the project (started here or elsewhere), score progress and a log tail."""

    TITLE = "Jobs"
    DEFAULT_CSS = """
    JobsPane #jobs-table { height: auto; max-height: 10; }
    JobsPane #job-log { height: 1fr; border-top: solid $panel; }
    """
    BINDINGS = [
        Binding("s", "score", "Score"),
        Binding("i", "integrate", "Integrate"),
        Binding("t", "train", "Train"),
        # in ? and the docs; the footer keeps its width at 80 columns
        Binding("m", "merge", "Merge weights", show=False),
        Binding("c", "cancel", "Cancel job"),
    ]

    def __init__(self, root: Path, **kwargs):
        super().__init__(root, **kwargs)
        self.jobs: dict[int, JobState] = {}
        self.seen_status: dict[int, str] | None = None
        self.given_labels = 0  # labels given in the Conflicts pane, as the store last said
        self.last_choice = None  # what routing = "auto" chose in the newest integration
        self.follow: int | None = None  # a job just launched here: its row is selected once shown

    def compose(self) -> ComposeResult:
        table = Table(id="jobs-table", cursor_type="row")
        table.add_columns("job", "kind", "status", "progress", "rate", "time", "device")
        yield table
        yield Static("No jobs yet: press s to score the teachers.", id="jobs-empty", classes="note")
        yield Static("", id="score-sets", classes="note")
        yield Static("", id="job-log")

    def main_widget(self) -> DataTable:
        return self.query_one("#jobs-table", DataTable)

    def apply_changes(self, changes: StoreChanges) -> None:
        self.jobs = {job.id: job for job in changes.jobs}
        self.given_labels = changes.given_labels
        if changes.integration is not None:
            self.last_choice = changes.integration.summary.routing_choice
        table = self.main_widget()
        sync_rows(table, {str(job.id): job_cells(job) for job in changes.jobs})
        if self.follow is not None and self.follow in self.jobs:  # its log below, not the first's
            table.move_cursor(row=table.get_row_index(str(self.follow)))
            self.follow = None
        self.query_one("#jobs-empty", Static).display = not changes.jobs
        show(self.query_one("#score-sets", Static), score_lines(self.config, changes.score_sets))
        self._announce_endings(changes.jobs)
        self._read_log()

    def _announce_endings(self, jobs: list[JobState]) -> None:
        """Notify jobs that end while the workbench watches (not those that ended before)."""
        first = self.seen_status is None
        seen = self.seen_status or {}
        for job in jobs:
            before = seen.get(job.id)
            if first or before == job.status or job.live:
                continue
            if job.status == "finished" and job.kind == "integrate":
                self._announce_integration(job)
            elif job.status == "finished":
                self.notify(f"job {job.id} ({job.label}) finished; {NEXT_STEP[job.kind]}",
                            title="Job finished")
            elif job.status in ("failed", "lost"):
                cause = job.error or "its process ended without recording why"
                self.notify(f"job {job.id} ({job.label}) {job.status}: {cause}\nIts log is in Jobs "
                            "(3); fix the cause and launch it again: it resumes where it stopped.",
                            title="Job failed", severity="error", timeout=12, markup=False)
        self.seen_status = {job.id: job.status for job in jobs}

    def _announce_integration(self, job: JobState) -> None:
        """What a finished integration did, read from the integration it recorded."""
        root, key = self.root, (job.ending or {}).get("integration")
        run_in_thread(self, lambda: IntegrationDone(recorded_integration(root, key).summary),
                      action="reading the integration")

    def on_integration_done(self, message: IntegrationDone) -> None:
        self.notify(integration_note(message.summary), title="Integration done")

    @on(DataTable.RowHighlighted, "#jobs-table")
    def _read_log(self) -> None:
        job = self._selected()
        if job is None:
            show(self.query_one("#job-log", Static), "")
            return
        log_path = job.log_path
        run_in_thread(self, lambda: JobLog(job.id, read_log_tail(Path(log_path)) if log_path
                                           else job.log_tail or []),
                      action="reading the job log", group="job-log", exclusive=True)

    def on_job_log(self, message: JobLog) -> None:
        job, selected = self.jobs.get(message.job_id), self._selected()
        if job is None or selected is None or selected.id != job.id:
            return
        text = Text(f"job {job.id} · {job.label} · {job.status}", "bold")
        if job.error:
            text.append(f"\n{job.error}", "red")
        for line in rank_lines(job):
            text.append(f"\n{line}")
        if not job.log_path:
            text.append("\nran in the foreground: its output went to the terminal that started it",
                        "dim")
        for line in message.lines[-12:]:
            text.append(f"\n{line}", "dim")
        show(self.query_one("#job-log", Static), text)

    def _selected(self) -> JobState | None:
        table = self.main_widget()
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return self.jobs.get(int(key))

    # -- actions -------------------------------------------------------------------------
    def action_score(self) -> None:
        config = self.require_config()
        if config is None:
            return
        scoring = config.scoring
        fields = [Field("mc_passes", "K (MC passes)", str(scoring.mc_passes),
                        placeholder='a number, or "auto": more passes only where undecided'),
                  Field("dropout", "dropout", str(scoring.dropout),
                        placeholder="auto: own rates, 0.1 where all are 0; model; or a rate"),
                  Field("batch_size", "batch size", str(scoring.batch_size)),
                  Field("device", "device", scoring.device, placeholder="auto, cpu, cuda, cuda:N"),
                  Field("devices", "several devices", "",
                        placeholder="optional: cuda:0,cuda:1 or all (one process each)"),
                  # one line at 80 columns (a checkbox's words do not wrap)
                  Field("representations", "representations", False,
                        "also draw them: mahalanobis, knn, joint read them", flag=True)]
        root = self.root

        def start(values: dict) -> int:
            passes = ("auto" if values["mc_passes"].strip().lower() == "auto"
                      else _whole(values["mc_passes"], 'K (or "auto")'))
            dropout = checked_setting(ScoringConfig, "dropout", values["dropout"], "the score form")
            batch = _whole(values["batch_size"], "batch size")
            updated = config_edit.set_scoring(config, mc_passes=passes, dropout=dropout)
            return launcher.launch(root, ScoreSpec(
                device=values["device"] if values["device"] != updated.scoring.device else None,
                batch_size=batch if batch != updated.scoring.batch_size else None,
                devices=_devices(values["devices"]),
                representations=True if values["representations"] else None))

        self.app.push_screen(FormScreen(
            "Score the teachers (MC dropout)", fields, start,
            note="K (kiwb's default 16) and the dropout are saved to kiwb.toml; another K or "
                 "dropout rate scores again. Finished shards are kept, so a stopped job resumes."),
            self._launched)

    def action_train(self) -> None:
        config = self.require_config()
        if config is None:
            return
        project = form_project(config)  # the routing shown is the one the job would use
        config, kind = project.config, project.kind
        integration, training = config.integration, config.training
        methods = (*kind.jobs.methods, *((SUPERVISED,) if kind.jobs.supervised else ()))
        fields = [
            *setting_fields(setting_form.TRAIN_FORM, integration, methods, self.given_labels),
            *setting_fields(setting_form.TRAINING_FORM, training, methods),
            Field("init_from_merge", "start from", "",
                  placeholder="optional: a merge run (m) in place of the base"),
            Field("devices", "several devices", "",
                  placeholder="optional: cuda:0,cuda:1 or all (data-parallel)"),
            Field("run", "run name", "", placeholder="default: from the method"),
            Field("resume", "resume", False, "continue the run from its last checkpoint", flag=True),
        ]
        root = self.root

        def start(values: dict) -> int:
            if not values["student"].strip():
                raise ConfigError("name the student's base checkpoint: a folder or a hub id like "
                                  "google-bert/bert-base-uncased")
            chosen = setting_form.form_overrides(integration, setting_form.TRAIN_FORM,
                                                 values, "the train form")
            trained = setting_form.form_overrides(training, setting_form.TRAINING_FORM,
                                                  values, "the train form")
            if "student" in trained:  # a folder as the project reads it
                trained["student"] = config_edit.typed_path(config, trained["student"])
            spec = TrainSpec(
                run=values["run"] or None, **chosen, **trained,
                devices=_devices(values["devices"]),
                init_from_merge=values["init_from_merge"].strip() or None,
                resume=values["resume"])
            spec.check_routing(config)
            # named as `kiwb train` names it: by every setting it resolves to, kiwb.toml's
            # transfer and the rest the form does not show included
            return launcher.launch(root, spec.named(integration, kind.jobs.default_routing))

        self.app.push_screen(FormScreen("Train the student", fields, start), self._launched)

    def action_merge(self) -> None:
        config = self.require_config()
        if config is None:
            return
        fields = [
            Field("method", "rule", DEFAULT_MERGE_METHOD, choices=tuple(MERGE_METHODS)),
            Field("scale", "lambda", "", placeholder="(0, 2]; empty: chosen on the eval set"),
            Field("top_k", "k (TIES, %)", "", placeholder="(0, 100]; empty: chosen on the eval set"),
            Field("base", "base", "", placeholder="empty: [training] student"),
            Field("run", "run name", "", placeholder="default: merge-RULE"),
            Field("force", "replace", False, "replace a run of that name", flag=True),
        ]
        root = self.root

        def start(values: dict) -> int:
            scale = _number(values["scale"], "lambda") if values["scale"].strip() else None
            top_k = _number(values["top_k"], "k") if values["top_k"].strip() else None
            base = values["base"] and config_edit.typed_path(config, values["base"])
            return launcher.launch(root, MergeSpec(
                run=values["run"] or None, method=values["method"], scale=scale, top_k=top_k,
                base=base or None, force=values["force"]).named())

        # where merging is in question: what averaging these heads elsewhere would do
        clashes = "".join(f" Note: {line}." for line in head_clash_lines(config))
        self.app.push_screen(FormScreen(
            "Merge the teachers' weights (no training)", fields, start,
            note="Teachers fine-tuned from one base; each label's head row keeps its slot. The "
                 f"merge shows in Accuracy (5) beside the students.{clashes}"), self._launched)

    def action_integrate(self) -> None:
        config = self.require_config()
        if config is None:
            return
        project = form_project(config)
        config, integration = project.config, project.config.integration
        fields = setting_fields(setting_form.INTEGRATE_FORM, integration, project.kind.jobs.methods,
                                self.given_labels)

        root = self.root

        def start(values: dict) -> int:
            spec = IntegrateSpec(**setting_form.form_overrides(
                integration, setting_form.INTEGRATE_FORM, values, "the integrate form"))
            spec.check_routing(config)
            return launcher.launch(root, spec)

        self.app.push_screen(FormScreen(
            "Integrate the teachers' scores", fields, start,
            note="Runs an integration job with these settings; kiwb.toml is left as it is."
                 + auto_note(self.last_choice)),
            self._launched)

    def action_cancel(self) -> None:
        job = self._selected()
        if job is None:
            return
        root = self.root
        run_in_thread(self, lambda: ActionDone(launcher.cancel(root, job.id)), action="cancelling")

    def _launched(self, job_id) -> None:
        if job_id is not None:
            self.notify(f"started job {job_id}; it keeps running if the workbench closes",
                        title="Job started")
            self.follow = job_id
            self.request_refresh()


def setting_fields(shown: tuple[setting_form.FormSetting, ...], section,
                       methods: tuple[str, ...], given_labels: int = 0) -> list[Field]:
    """A form's fields for kiwb.toml settings, from their declaration: each starts at the
    project's value in `section` (its table); the methods offered are the teachers' kind's;
    the given labels' line says how many there are."""
    def describe(setting: setting_form.FormSetting) -> str:
        if setting.name == "labels":  # the given labels
            return f"{setting.describe}: {given_labels:,} given"
        return setting.describe

    return [Field(setting.name, setting.label, setting.shown(section), describe(setting),
                  choices=methods if setting.name == "method" else setting.choices(),
                  flag=setting.flag)
            for setting in shown]


def auto_note(choice) -> str:
    """What routing "auto" chose last (a RoutingChoice, or None before it chose)."""
    if choice is None:
        return (" Routing auto: each label-free routing measured on the labeled texts, the "
                "best taken.")
    return f" Routing auto chose {choice.chosen} last time: {choice.short()}."


def form_project(config: ProjectConfig) -> LoadedProject:
    """The project as a job started from a form reads it: its teachers' kind (its methods: the
    forms' choices) and its "auto" settings made the kind's; of the default kind where the
    teachers cannot be read yet (the job then says what is wrong)."""
    try:
        return LoadedProject.of(config)
    except ConfigError:
        return LoadedProject.of(config, kind_named(None))


def integration_note(summary: IntegrationSummary) -> str:
    """What an integration did: its routing, the texts each teacher won, and the conflicts."""
    own = kind_named(summary.teachers_kind).words.integrated_line(summary)
    if own is not None:
        return f"{own}; see Uncertainty (4) and Conflicts (6)"
    routing = summary.routing.name if summary.routing is not None else None
    chosen = summary.routing_choice  # routing = "auto": the one it chose
    if chosen is not None:
        routing = f"{chosen.chosen}"
    wins = ", ".join(f"{teacher} won {count:,}" for teacher, count in summary.wins.items())
    return (f"integrated {summary.num_texts:,} texts"
            + (f" with {routing} routing" if routing else "")
            + (" chosen by auto" if chosen is not None else "")
            + f" ({wins}): {summary.conflicts:,} conflicts under margin "
            f"{summary.conflict_threshold}; see Uncertainty (4) and Conflicts (6)")


def job_cells(job: JobState) -> tuple:
    progress = job.progress or {}
    done, total = progress.get("done"), progress.get("total")
    shown = (f"{done:,}/{total:,} {progress.get('unit', '')}" if total else "")
    rate = f"{progress['rate']:,.1f}/s" if job.live and progress.get("rate") else ""
    if job.live:
        timing = f"ETA {format_duration(progress['eta_s'])}" if progress.get("eta_s") is not None else ""
    else:
        # the column says "time": an ended job's cell is its duration alone, so a long run name
        # and "3,200/3,200 pairs" keep their room at 80 columns
        timing = format_duration(job.duration()) if job.started_at else ""
    return (str(job.id), job.label, Text(job.status, STATUS_STYLE.get(job.status, "")), shown, rate,
            timing, job.device or "")


def score_lines(config: ProjectConfig | None, score_sets: list[ScoreSetProgress]) -> Text:
    """The newest score set of each (teacher, data set) the config names, with a bar."""
    teachers = [t.name for t in config.teachers] if config else None
    newest: dict[tuple[str, str], ScoreSetProgress] = {}
    for score_set in score_sets:  # oldest first, so the newest wins
        if teachers is None or score_set.teacher in teachers:
            newest[(score_set.teacher, score_set.dataset)] = score_set
    if newest and all(score_set.complete for score_set in newest.values()):
        return complete_score_lines(list(newest.values()))
    text = Text()
    # a representation set's name is longer ("a · unlabeled (representation)"): the bars align
    width = max([24, *(len(f"{s.teacher} · {s.dataset}") + 1 for s in newest.values())])
    for number, score_set in enumerate(newest.values()):
        share = score_set.done_rows / score_set.num_texts if score_set.num_texts else 0.0
        text.append("\n" if number else "scores saved, per teacher and data set\n",
                    "bold" if not number else "")
        text.append(f"{score_set.teacher} · {score_set.dataset}".ljust(width))
        text.append(hbar(share, 20), "green" if score_set.complete else "")
        text.append(f" {score_set.done_rows:,}/{score_set.num_texts:,} texts")
    return text


def complete_score_lines(score_sets: list[ScoreSetProgress]) -> Text:
    """Every set saved: one line per teacher ("news · unlabeled 1,200, eval 400 texts, with
    representations"), not a bar per set, so at 80×24 the job's detail below keeps its room."""
    by_teacher: dict[str, list[ScoreSetProgress]] = {}
    for score_set in score_sets:
        by_teacher.setdefault(score_set.teacher, []).append(score_set)
    text = Text("scores saved, per teacher ✓", "bold")
    for teacher, sets in by_teacher.items():
        scores = [s for s in sets if not s.dataset.endswith(REPRESENTATION_SUFFIX)]
        drawn = len(sets) > len(scores)
        text.append(f"\n{teacher} · " + ", ".join(f"{s.dataset} {s.done_rows:,}" for s in scores)
                    + " texts" + (", with representations" if drawn else ""))
    return text


def _devices(value: str) -> str | None:
    """The form's several devices (none: one process); a malformed list is refused here."""
    from kiwb.project.job_specs import device_list

    text = value.strip()
    if not text:
        return None
    device_list(text)
    return text


def _whole(value: str, name: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise ConfigError(f"{name} must be a whole number of 1 or more, got {value!r}")
    return int(value)


def _number(value: str, name: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if number <= 0:
        raise ConfigError(f"{name} must be more than 0, got {value!r}")
    return number
