"""CLI subcommand handlers: parse nothing, call the same functions the workbench calls."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kiwb.errors import KiwbError
from kiwb.project.opening import open_existing_store, open_project
from kiwb.shell import command
from kiwb.workers.quiet import quiet_libraries

RECENT_JOBS = 10  # ended jobs that `kiwb jobs` shows without --all
LOG_LINES_SHOWN = 8


DATA_HUB = "hf://datasets/ORG/NAME for a Hub data set"  # how kiwb.toml names one


def _from_cwd(path: str, option: str, hub: str = "a Hub id like org/model") -> str:
    """Paths typed on the command line are relative to the shell's folder, not the project's:
    one found is written whole. One missing that is plainly a local path (./, ../, /, ~, or
    folders within folders) is refused here, as typed: kiwb.toml would read it from the
    project's folder and name a path the user never meant. Anything else (a Hub id like
    org/model, hf://...) is kept as typed."""
    found = Path(path).expanduser()
    if found.exists():
        return str(found.resolve())
    local = "://" not in path and (path.startswith((".", "/", "~"))
                                   or len(Path(path).parts) > 2)
    if local:
        raise KiwbError(f"{option}{path}: no such file or folder from {Path.cwd()}; give a path "
                        f"from this folder, or {hub}")
    return path


def _teacher_option(value: str):
    from kiwb.project.config import TeacherConfig

    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise KiwbError(f"--teacher {value!r}: write it as NAME=PATH, e.g. --teacher news=./models/news")
    return TeacherConfig(name=name, path=_from_cwd(path, f"--teacher {name}="))


def cmd_init(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project.config import DatasetConfig, write_new_project
    from kiwb.project.paths import ProjectPaths

    root = args.project.resolve()
    unlabeled = (DatasetConfig(path=_from_cwd(args.unlabeled, "--unlabeled ", DATA_HUB),
                               text_column=args.text_column) if args.unlabeled else None)
    evaluation = (
        DatasetConfig(path=_from_cwd(args.eval, "--eval ", DATA_HUB), text_column=args.text_column,
                      label_column=args.label_column)
        if args.eval else None
    )
    written = write_new_project(
        root, name=args.name or root.name, teachers=[_teacher_option(t) for t in args.teacher],
        unlabeled=unlabeled, eval=evaluation,
        student=args.student and _from_cwd(args.student, "--student "),
        force=args.force,
    )
    ProjectPaths(root).make_layout()
    stdout.print(f"Created {written}")
    from kiwb.project.config import load_config
    from kiwb.project.config_schema import teacher_model_configs
    from kiwb.project.dropout_rates import no_dropout, scoring_dropout
    from kiwb.project.head_clash import head_clash_lines

    created = load_config(written)
    for teacher, model_config in teacher_model_configs(created):
        if no_dropout(model_config):  # MC dropout is what routes texts: say where it has none
            used = scoring_dropout(created.scoring.dropout, model_config)
            stdout.print(f"Note: teacher {teacher.name} has no dropout (every rate in its "
                         "config.json is 0): " + (
                             f"kiwb sets {used:g} in each for its MC passes ([scoring] dropout "
                             '= "auto"; "model" keeps none)' if used != "model" else
                             "its MC passes will equal its plain one"),
                         highlight=False, markup=False, soft_wrap=True)
    clashes = head_clash_lines(created)
    if clashes:  # it matters only for merging weights: one short note, kiwb merge says more
        stdout.print(f"Note: {len(clashes)} pair(s) of teachers have classifier heads of one "
                     "shape with other labels; if you merge their weights, use kiwb merge "
                     "(averaging them elsewhere mixes labels)", highlight=False, markup=False,
                     soft_wrap=True)
    stdout.print(f"Next: edit it if needed, then run [bold]{command('score', args.project)}[/bold]")
    return 0


def run_or_launch(args: argparse.Namespace, spec) -> int:
    """Start a job as a detached worker and follow it here (or just start it: --detach), so
    a closed terminal or a lost SSH connection does not stop it; --foreground runs it in
    this process instead. Either way it is recorded, so `kiwb jobs` shows it."""
    return start_job(args, spec)[1]


def start_job(args: argparse.Namespace, spec) -> tuple[int, int]:
    """`run_or_launch`, returning the job's id and its exit status."""
    from kiwb.console import stdout
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    root = args.project.resolve()
    if args.foreground:
        from kiwb.workers.runner import run_in_foreground

        with Store(ProjectPaths(root).store) as store:
            return run_in_foreground(store, spec, str(args.project))
    from kiwb.launch import launch_job
    from kiwb.project.job_specs import job_label

    job_id = launch_job(root, spec)
    label = job_label(spec.kind, spec.job_run())
    if args.detach:
        stdout.print(f"Started job {job_id} ({label}) in the background; it keeps running if "
                     f"this terminal closes.\n  follow it: {command('logs', job_id, args.project, '-f')}\n"
                     f"  status:    {command('jobs', args.project)}\n"
                     f"  stop it:   {command('cancel', job_id, args.project)}",
                     highlight=False, markup=False, soft_wrap=True)
        return job_id, 0
    return job_id, follow_job(root, job_id, label, str(args.project))


def follow_job(root, job_id: int, label: str, project_label: str) -> int:
    """Show a background job's log and progress until it ends; its worker's exit status.

    Ctrl-C stops following, not the job.
    """
    from kiwb.console import FollowedJob, console
    from kiwb.launch import follow_log
    from kiwb.project.jobs import exit_code
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    if console.is_terminal:  # for the person watching; a script reads the job's own output
        console.print(f"Job {job_id} ({label}) runs in the background and goes on if this "
                      "terminal closes; Ctrl-C stops following it.", highlight=False, markup=False,
                      soft_wrap=True)
    with Store(ProjectPaths(root).store) as store:
        try:
            with FollowedJob(job_id, console) as shown:
                for chunk in follow_log(store.jobs, job_id, on_progress=shown.progress):
                    shown.text(chunk)
        except KeyboardInterrupt:
            console.print(f"Stopped following job {job_id}; it keeps running.\n"
                          f"  follow it: {command('logs', job_id, project_label, '-f')}\n"
                          f"  stop it:   {command('cancel', job_id, project_label)}",
                          highlight=False, markup=False, soft_wrap=True)
            return 130
        return exit_code(store.jobs.get(job_id))


def serve_other_rank(args: argparse.Namespace, spec, module: str, follower: str) -> int | None:
    """Under torchrun / accelerate launch (one process per rank): a rank other than 0 does
    its share and returns its exit status (it keeps no record and never opens the store);
    rank 0 goes on as the job, in torchrun's process (so in the foreground). None otherwise.
    A misspelt --device or --devices is refused here, before any rank or job starts."""
    import importlib

    from kiwb.workers.ranks import launched_rank

    spec.check()
    rank = launched_rank()
    if rank is None:
        return None
    if not rank.leads:
        return getattr(importlib.import_module(module), follower)(
            args.project.resolve(), spec.device_list(), spec.device)
    args.foreground, args.detach = True, False
    return None


def cmd_score(args: argparse.Namespace) -> int:
    from kiwb.project.job_specs import ScoreSpec

    spec = ScoreSpec.from_args(args)
    if (served := serve_other_rank(args, spec, "kiwb.workers.score_ranks", "run_follower")) is not None:
        return served
    open_project(args.project, scoring=True)[1].close()  # refuse a bad kiwb.toml before any job
    return run_or_launch(args, spec)


def cmd_integrate(args: argparse.Namespace) -> int:
    """Integration runs as a job like the others; the summary is then read from the store."""
    from kiwb.project.job_specs import IntegrateSpec

    spec = IntegrateSpec.from_args(args)
    config, store = open_project(args.project, scoring=True)  # a bad kiwb.toml: before any job
    store.close()
    from kiwb.project.teacher_kinds import LoadedProject

    spec.check_routing(LoadedProject.of(config).config)
    if args.json and not (args.foreground or args.detach):
        args.foreground = True  # the job's log goes to stderr, the JSON alone to stdout
    job_id, code = start_job(args, spec)
    if code != 0 or args.detach:
        return code
    from kiwb.console import stdout
    from kiwb.project.queries import recorded_integration
    from kiwb.report import integration_tables

    with open_existing_store(args.project) as store:
        key = store.jobs.get(job_id).ending["integration"]
    record = recorded_integration(args.project, key)
    if args.json:
        print(json.dumps({**record.summary.printed(), "key": key}, indent=2))
    else:
        for table in integration_tables(record):
            stdout.print(table)
        check = record.summary.check
        if check is not None and check.flagged:
            stdout.print(check.line(), style="bold yellow", highlight=False, markup=False,
                         soft_wrap=True)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from kiwb.project.job_specs import TrainSpec

    spec = TrainSpec.from_args(args, student=args.student and _from_cwd(args.student, "--student "))
    if (served := serve_other_rank(args, spec, "kiwb.workers.train_ranks",
                                   "run_train_follower")) is not None:
        return served
    from kiwb.project.teacher_kinds import LoadedProject

    config, store = open_project(args.project)
    store.close()
    project = LoadedProject.of(config)
    spec.check_routing(project.config)  # refused here, before a job is started for it
    return run_or_launch(args, spec.named(project.config.integration,
                                          project.kind.jobs.default_routing))


def cmd_labels(args: argparse.Namespace) -> int:
    from kiwb.labels_command import run_labels

    return run_labels(args)


def cmd_store(args: argparse.Namespace) -> int:
    from kiwb.store_command import run_store

    return run_store(args)


def cmd_merge(args: argparse.Namespace) -> int:
    """A merge runs as a job like the others; what it chose and its figures are in its log."""
    from kiwb.project.job_specs import MergeSpec

    spec = MergeSpec.from_args(args).named()
    open_project(args.project)[1].close()  # a bad kiwb.toml: before any job
    # what cannot merge is refused before the job is recorded (kiwb.project.merge_check)
    return run_or_launch(args, spec)


def cmd_export(args: argparse.Namespace) -> int:
    from kiwb.project.config import load_config
    from kiwb.project.job_specs import ExportSpec

    load_config(args.project)
    if not args.run:
        from kiwb.workers.predict import chosen_run

        args.run = chosen_run(args.project)
    return run_or_launch(args, ExportSpec.from_args(args))


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from kiwb.console import stdout
    from kiwb.project.jobs import rank_lines, taken_over_by

    with open_existing_store(args.project) as store:
        jobs = every_job = store.jobs.all()
    if not args.all:  # live jobs and the most recent others
        recent = {job.id for job in jobs if not job.live}
        recent = set(sorted(recent)[-RECENT_JOBS:])
        jobs = [job for job in jobs if job.live or job.id in recent]
    if args.json:
        print(json.dumps([job.to_dict() for job in jobs], indent=2))
        return 0
    if not jobs:
        stdout.print("No jobs yet.")
        return 0
    stdout.print(jobs_table(jobs))
    for job in jobs:
        lines = rank_lines(job)
        if lines and (job.live or len(jobs) <= RECENT_JOBS):
            stdout.print(f"\n[bold]job {job.id} on {len(lines)} ranks[/bold]", soft_wrap=True)
            for line in lines:
                stdout.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    for job in jobs:
        for subject, check in job_checks(job):
            if check.flagged:
                stdout.print(f"\n[bold]job {job.id} ({escape(job.label)})[/bold]: "
                             f"{escape(check.line(subject))}", highlight=False, soft_wrap=True)
    for job in jobs:
        if job.status not in ("failed", "lost"):
            continue
        successor = taken_over_by(job, every_job)
        if successor is not None:  # its resume hint would repeat what the later job did
            stdout.print(f"\n[bold]job {job.id} {job.status}[/bold]: taken over by job "
                         f"{successor.id} ({successor.status})", soft_wrap=True)
            continue
        stdout.print(f"\n[bold]job {job.id} {job.status}[/bold]"
                     + (f": {escape(job.error)}" if job.error else "")
                     + ("; last lines of its log:" if job.log_tail else ""), soft_wrap=True)
        for line in (job.log_tail or [])[-LOG_LINES_SHOWN:]:
            stdout.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
        hint = job.resume_command(str(args.project))
        stdout.print(f"  resume with: {hint}", highlight=False, markup=False, soft_wrap=True)
    return 0


def jobs_table(jobs):
    """A table of jobs: id, kind, run, status, progress, start, duration, device."""
    import time

    from kiwb.console import FittedTable
    from kiwb.project.jobs import format_duration

    # Eight columns: borderless, as a listing, so that they fit 80 columns; the start and the
    # device wrap before any other column narrows, and give way (the device first) on a
    # terminal too narrow for them.
    table = FittedTable("job", "kind", "run", "status", "progress", "started", "duration",
                        "device", wrap=("started", "device"), optional=("started", "device"),
                        box=None, pad_edge=False)
    for job in jobs:
        progress = job.progress
        shown = f"{progress['done']:,}/{progress['total']:,}" if progress else ""
        started = job.started_at or job.created_at
        # Each check's mark, and a student's fit to its targets, on a line of its own under
        # the status keep the column narrow.
        status = "\n".join([job.status, *(check.mark.strip() for _, check in job_checks(job)
                                          if check.flagged), *job_fit(job)])
        table.add_row(
            str(job.id), job.kind, "" if job.label == job.kind else job.run, status, shown,
            time.strftime("%m-%d %H:%M", time.localtime(started)),
            format_duration(job.duration()), device_text(job),
        )
    return table


def job_checks(job) -> list:
    """(subject, check) for each check a finished job recorded: the routing check of an
    integration (an integrate job's, or a training job's own), and a student's learning check."""
    from kiwb.core.learning_check import check_of
    from kiwb.core.routing_check import RoutingCheck

    found = []
    routing = RoutingCheck.from_dict((job.ending or {}).get("routing_check"))
    if routing is not None:
        found.append(("its routing", routing))
    if job.kind == "train" and (learning := check_of(job.ending)) is not None:
        found.append(("its student", learning))
    return found


def job_fit(job) -> list[str]:
    """`fit 96.7%` for a training job whose student's fit to its own targets was measured."""
    from kiwb.core.learning_check import check_of

    check = check_of(job.ending) if job.kind == "train" else None
    return [] if check is None or check.fit is None else [f"fit {100 * check.fit:.1f}%"]


def device_text(job) -> str:
    """`cuda:0 · A100 · 3.2 GB peak` for a GPU job (the GPU and memory it recorded), else the device."""
    recorded = {**(job.progress or {}), **(job.ending or {})}
    parts = [job.device or recorded.get("device") or ""]
    if recorded.get("gpu"):
        parts.append(recorded["gpu"])
    if recorded.get("precision") not in (None, "float32"):
        parts.append(recorded["precision"])
    if recorded.get("peak_memory_gb") is not None:
        parts.append(f"{recorded['peak_memory_gb']:.1f} GB peak")
    return " · ".join(part for part in parts if part)


def job_and_project(args: argparse.Namespace) -> tuple[int | None, Path]:
    """`kiwb logs|cancel [JOB] [DIR]`: the job id (None: left to the command) and the project.
    A first word that is a folder and no number is the project, so `kiwb logs DIR` and
    `kiwb logs DIR 3` read as a user means them."""
    job, project = args.job, args.project
    if job is not None and not job.isdigit() and Path(job).is_dir():
        job, project = (None if project == Path(".") else str(project)), Path(job)
    if job is not None and not job.isdigit():
        raise KiwbError(f"{job!r} is not a job id; give the number kiwb jobs lists: "
                        f"kiwb {args.command} JOB [DIR]")
    return (int(job) if job is not None else None), project


def cmd_logs(args: argparse.Namespace) -> int:
    import sys

    from kiwb.launch import follow_log

    job, project = job_and_project(args)
    with open_existing_store(project) as store:
        if job is None:  # the newest job: the one a user just started
            jobs = store.jobs.all()
            if not jobs:
                raise KiwbError(f"{project}: no jobs yet; start one with: "
                                + command("score", project))
            job = jobs[-1].id
        for chunk in follow_log(store.jobs, job, follow=args.follow):
            sys.stdout.write(chunk)
            sys.stdout.flush()
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.launch import cancel_job

    job, project = job_and_project(args)
    with open_existing_store(project) as store:
        if job is None:  # only when one job runs: cancelling is not to be guessed
            live = [each for each in store.jobs.all() if each.live]
            if len(live) != 1:
                raise KiwbError(f"{project}: no job is running" if not live else
                                f"{project}: {len(live)} jobs are running ("
                                + ", ".join(f"{each.id}: {each.label}" for each in live)
                                + "); name one: kiwb cancel JOB")
            job = live[0].id
        stdout.print(cancel_job(store, job), highlight=False)
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    quiet_libraries()
    import sys

    from kiwb.console import stdout
    from kiwb.kinds import kind_named
    from kiwb.workers.kind_runtimes import runtime_of
    from kiwb.workers.predict import folder_kind, resolve_model_folder

    folder = resolve_model_folder(args.model, args.run)  # a wrong folder: before any typing
    if not args.texts and sys.stdin.isatty():  # else a terminal would wait without a word
        from kiwb.console import console

        console.print("Type the texts, one per line; Ctrl-D to classify them", highlight=False)
    texts = args.texts or [line.strip() for line in sys.stdin if line.strip()]
    if not texts:
        raise KiwbError("no texts to classify; pass them as arguments or one per line on stdin")
    try:
        lines = runtime_of(kind_named(folder_kind(folder))).predict(folder, texts, args.top)
    except KiwbError:
        raise
    except Exception as error:  # transformers and safetensors raise many kinds for a bad folder
        raise KiwbError(unloadable(folder, error)) from None
    print_predictions(stdout, lines)
    return 0


def unloadable(folder, error: Exception) -> str:
    """Why a model folder could not be loaded, in one line, with what to give instead."""
    cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (f"{folder}: cannot load this model ({type(error).__name__}: {cause[:160]}); give a "
            "folder written whole by save_pretrained or kiwb export (a config.json with its "
            "model_type, and its weights)")


def print_predictions(console, lines: list[str]) -> None:
    """A kind runtime's predict lines (tab-separated fields, Rich markup). To a pipe, one line
    per text as it is, for scripts. In a terminal the last field (the text, or an encoder's
    neighbours) goes on a line of its own, indented and cut to the width, so a narrow terminal
    never wraps a text in among the scores."""
    for line in lines:
        *answers, last = line.split("\t")
        if not console.is_terminal or not answers:
            console.print(line, highlight=False, soft_wrap=True)
            continue
        console.print("  ".join(answers), highlight=False)
        console.print(f"  {last}", highlight=False, no_wrap=True, overflow="ellipsis")


def cmd_teach(args: argparse.Namespace) -> int:
    quiet_libraries()
    from pathlib import Path

    from kiwb.console import console, progress_bar
    from kiwb.core.learning_check import check_of
    from kiwb.core.training_defaults import AUTO, total_steps
    from kiwb.project.job_specs import TeachSpec
    from kiwb.workers.data import load_table
    from kiwb.workers.runtime import prepare_device, resolve_device
    from kiwb.workers.teach import TeachSettings, subset_rows, teach

    spec = TeachSpec.from_args(args)
    spec.check()
    out = Path(spec.out)
    _check_teacher_destination(out, spec.force)
    columns = {"text_column": spec.text_column, "label_column": spec.label_column}
    train = load_table(spec.data, role="teach", split=spec.split, subset=spec.subset, **columns)
    dev = (load_table(spec.dev, role="teach-dev", split=spec.dev_split, subset=spec.dev_subset,
                      **columns) if spec.dev else None)
    settings = TeachSettings(epochs=spec.epochs, min_steps=spec.min_steps,
                             learning_rate=spec.learning_rate, balance=spec.balance,
                             batch_size=spec.batch_size, max_length=spec.max_length, seed=spec.seed)
    labels = spec.label_list
    rows = len(subset_rows(train, labels)[0])
    total = total_steps(rows, settings.batch_size, settings.epochs, settings.min_steps)
    device = resolve_device(spec.device)
    prepare_device(device)
    console.print(f"Teaching {', '.join(labels)} from {rows:,} texts on {device}: {total:,} steps"
                  + ("" if settings.balance == "none" else f", classes balanced by {settings.balance}"))
    with progress_bar("teach", total=total, unit="steps") as advance:
        best = teach(spec.base, labels, train, dev, out, settings, device,
                     progress=lambda n, loss: advance(f"teach · loss {loss:.4f}", n))
    chosen = "" if settings.learning_rate != AUTO else " (auto for the base's width)"
    console.print(f"Learning rate {best['learning_rate']:.2e}{chosen}", highlight=False)
    if best.get("accuracy") is not None:
        macro = (f", macro-F1 {100 * best['macro_f1']:.2f}%" if best.get("macro_f1") is not None
                 else "")
        console.print(f"Best dev accuracy {100 * best['accuracy']:.2f}%{macro} at step {best['step']}")
    console.print(f"Wrote {out}")
    check = check_of(best)
    if check is not None and check.flagged:
        refused = " kiwb will refuse it as a teacher." if not check.learned else ""
        console.print(check.line("this teacher") + "." + refused, style="bold yellow",
                      highlight=False, markup=False, soft_wrap=True)
    return 0


def _check_teacher_destination(out, force: bool) -> None:
    """Refuse an existing --out, unless --force and it is empty or a checkpoint (config.json):
    --force must never wipe a folder of other things."""
    if not out.exists():
        return
    if not force:
        raise KiwbError(f"{out} already exists; choose another folder or add --force")
    if out.is_dir() and (not any(out.iterdir()) or (out / "config.json").is_file()):
        return
    raise KiwbError(f"{out} is neither an empty folder nor a model checkpoint (no config.json), "
                    "so --force will not replace it; choose another --out")


def cmd_evaluate(args: argparse.Namespace) -> int:
    quiet_libraries()
    from kiwb.console import stdout
    from kiwb.project.teacher_kinds import load_project
    from kiwb.report import evaluation_table
    from kiwb.workers.evaluate import evaluate_checkpoint
    from kiwb.workers.export import choose_checkpoint
    from kiwb.workers.project_inputs import load_dataset_role
    from kiwb.workers.runtime import prepare_device, resolve_device

    project = load_project(args.project)
    config = project.config
    if not args.run:
        from kiwb.workers.predict import chosen_run

        args.run = chosen_run(config.root)
    if args.data is not None:  # read as the kind reads its eval set, with --data's columns
        from kiwb.project.config import DatasetConfig
        from kiwb.workers.kind_runtimes import runtime_of

        spec = config.data.eval
        pairs = spec.pair_column if spec else None  # an embedding project's retrieval probe
        table = runtime_of(project.kind).load_table(str(args.data), DatasetConfig(
            path=str(args.data), text_column=args.text_column, split=args.split,
            subset=args.subset,
            label_column=args.label_column or (spec and spec.label_column) or (
                None if pairs else "label"),
            label_separator=spec.label_separator if spec else None,
            tokens_column=args.tokens_column or (spec and spec.tokens_column) or None,
            tags_column=args.tags_column or (spec and spec.tags_column) or None,
            tasks=spec.tasks if spec else None, pair_column=pairs), "evaluate", config)
    else:
        table = load_dataset_role(config, "eval", project.kind)
        if table is None:
            raise KiwbError(f"{config.file}: no [data.eval]; pass --data FILE with a label column")
    checkpoint = choose_checkpoint(config.root, args.run, args.checkpoint)
    device = resolve_device(config.training.device)
    prepare_device(device)
    report = evaluate_checkpoint(checkpoint, table, device,
                                 config.training.batch_size, config.training.max_length)
    report.update({"run": args.run, "checkpoint": checkpoint.name, "data": table.source})
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        stdout.print(evaluation_table(report))
        tuned_here = report.get("at_half") or any(
            figures.get("at_half") for figures in (report.get("tasks") or {}).values())
        if args.data is None and tuned_here:
            stdout.print("The label thresholds were tuned on these eval texts, so the figures at "
                         "them flatter the student here; judge it at 0.5, or on other labeled "
                         "texts with --data.", highlight=False)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    from kiwb.tui import run

    return run(workbench_project(args.project), theme=args.theme, pane=args.pane)


def cmd_serve(args: argparse.Namespace) -> int:
    from kiwb.serve_command import serve

    return serve(workbench_project(args.project), args.host, args.port, args.theme)


def workbench_project(project) -> Path:
    """The folder the workbench opens (kiwb ui, kiwb serve): there, with a store it can read."""
    from kiwb.project.paths import ProjectPaths

    root = project.resolve()
    if not root.is_dir():
        raise KiwbError(f"{project}: no such folder; create a project there with: "
                        + command("init", project))
    refuse_damaged_store(ProjectPaths(root).store)
    return root


def refuse_damaged_store(path) -> None:
    """The workbench reads the store from every pane: a damaged one is named here in one line,
    before the screen opens, instead of a traceback from whichever pane reads it first."""
    from kiwb.errors import StoreDamaged
    from kiwb.project.backups import integrity_problems
    from kiwb.project.database import damaged_message, refuse_empty_beside_work

    refuse_empty_beside_work(path)
    if path.is_file() and path.stat().st_size and (problems := integrity_problems(path, limit=1)):
        raise StoreDamaged(damaged_message(path, problems[0]))


def cmd_demo(args: argparse.Namespace) -> int:
    from kiwb.demo.command import run_demo

    return run_demo(args.project, no_ui=args.no_ui, quick=args.quick, kind=args.kind)
