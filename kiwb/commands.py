"""CLI subcommand handlers: parse nothing, call the same functions the workbench calls."""

from __future__ import annotations

import argparse
import json

from kiwb.errors import KiwbError
from kiwb.workers.quiet import quiet_libraries

RECENT_JOBS = 10  # ended jobs that `kiwb jobs` shows without --all
LOG_LINES_SHOWN = 8


def _from_cwd(path: str) -> str:
    """Paths typed on the command line are relative to the shell's folder, not the project's."""
    from pathlib import Path

    return str(Path(path).resolve()) if Path(path).exists() else path


def _teacher_option(value: str):
    from kiwb.project.config import TeacherConfig

    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise KiwbError(f"--teacher {value!r}: write it as NAME=PATH, e.g. --teacher news=./models/news")
    return TeacherConfig(name=name, path=_from_cwd(path))


def cmd_init(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project.config import DatasetConfig, write_new_project
    from kiwb.project.paths import ProjectPaths

    root = args.project.resolve()
    unlabeled = DatasetConfig(path=_from_cwd(args.unlabeled), text_column=args.text_column) if args.unlabeled else None
    evaluation = (
        DatasetConfig(path=_from_cwd(args.eval), text_column=args.text_column, label_column=args.label_column)
        if args.eval else None
    )
    written = write_new_project(
        root, name=args.name or root.name, teachers=[_teacher_option(t) for t in args.teacher],
        unlabeled=unlabeled, eval=evaluation, student=args.student and _from_cwd(args.student),
        force=args.force,
    )
    ProjectPaths(root).make_layout()
    stdout.print(f"Created {written}")
    stdout.print(f"Next: edit it if needed, then run [bold]kiwb score {args.project}[/bold]")
    return 0


def open_project(project, *, scoring: bool = False):
    """Load and validate a project's config, then open its store (created on first use).

    `scoring`: the command needs two or more teachers and unlabeled texts; a config without
    them is refused before anything is written.
    """
    from kiwb.project.config import load_config
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    config = load_config(project)
    if scoring:
        config.require_scoring_inputs()
    paths = ProjectPaths(config.root)
    paths.make_layout()
    return config, Store(paths.store)


def run_or_launch(args: argparse.Namespace, kind: str, run: str, settings: dict) -> int:
    """Start a job as a detached worker and follow it here (or just start it: --detach), so
    a closed terminal or a lost SSH connection does not stop it; --foreground runs it in
    this process instead. Either way it is recorded, so `kiwb jobs` shows it."""
    from kiwb.console import stdout
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    root = args.project.resolve()
    if args.foreground:
        from kiwb.workers.job import run_job

        with Store(ProjectPaths(root).store) as store:
            job_id = store.jobs.create(kind, run, settings)
            return run_job(store, job_id, project_label=str(args.project))
    from kiwb.launch import launch_job

    job_id = launch_job(root, kind, settings)
    label = kind if kind == "score" else f"{kind} {run}"
    if args.detach:
        stdout.print(f"Started job {job_id} ({label}) in the background; it keeps running if "
                     f"this terminal closes.\n  follow it: kiwb logs {job_id} {args.project} -f\n"
                     f"  status:    kiwb jobs {args.project}\n"
                     f"  stop it:   kiwb cancel {job_id} {args.project}",
                     highlight=False, markup=False, soft_wrap=True)
        return 0
    return follow_job(root, job_id, label, str(args.project))


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
                          f"  follow it: kiwb logs {job_id} {project_label} -f\n"
                          f"  stop it:   kiwb cancel {job_id} {project_label}",
                          highlight=False, markup=False, soft_wrap=True)
            return 130
        return exit_code(store.jobs.get(job_id))


def cmd_score(args: argparse.Namespace) -> int:
    from kiwb.project.jobs import SCORE_RUN

    open_project(args.project, scoring=True)[1].close()  # refuse a bad kiwb.toml before any job
    return run_or_launch(args, "score", SCORE_RUN,
                         {"device": args.device, "batch_size": args.batch_size})


def cmd_integrate(args: argparse.Namespace) -> int:
    config, store = open_project(args.project, scoring=True)  # a bad kiwb.toml: before heavy imports
    quiet_libraries()
    from kiwb.console import stdout
    from kiwb.report import integration_tables
    from kiwb.workers.integrate import IntegrationSettings, run_integration

    settings = IntegrationSettings.from_config(
        config, method=args.method, tau=args.tau, reweight=args.reweight, use_mc=args.use_mc,
        conflict_threshold=args.conflict_threshold, routing=args.routing,
    )
    with store:
        summary = run_integration(config, store, settings)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for table in integration_tables(summary, settings):
            stdout.print(table)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from kiwb.project.config import check_routing

    if args.min_steps is not None and args.min_steps < 0:
        raise KiwbError(f"--min-steps {args.min_steps}: give 0 (train exactly --epochs) or more steps")
    config, store = open_project(args.project)
    store.close()
    if args.routing:  # refused here, before a job is started for it
        check_routing(config, args.routing)
    run = args.run
    if run is None:
        quiet_libraries()
        from kiwb.workers.integrate import IntegrationSettings
        from kiwb.workers.train import default_run_name

        run = default_run_name(IntegrationSettings.from_config(
            config, method=args.method, tau=args.tau, reweight=args.reweight, use_mc=args.use_mc,
            routing=args.routing))
    settings = {
        "run": run, "method": args.method, "tau": args.tau, "reweight": args.reweight,
        "use_mc": args.use_mc, "routing": args.routing,
        "student": args.student and _from_cwd(args.student),
        "epochs": args.epochs, "min_steps": args.min_steps, "device": args.device,
        "resume": args.resume,
    }
    return run_or_launch(args, "train", run, settings)


def cmd_export(args: argparse.Namespace) -> int:
    from kiwb.project.config import load_config

    load_config(args.project)
    destination = args.destination and str(args.destination.resolve())
    settings = {"run": args.run, "checkpoint": args.checkpoint, "destination": destination,
                "force": args.force}
    return run_or_launch(args, "export", args.run, settings)


def _open_store(project):
    """The store of an existing project, for commands that only read or signal jobs."""
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    path = ProjectPaths(project.resolve()).store
    if not path.is_file():
        raise KiwbError(f"{project}: no kiwb project store here; run kiwb score or kiwb train "
                        "there first (or name the project folder)")
    return Store(path)


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from kiwb.console import stdout
    from kiwb.project.jobs import resume_command

    with _open_store(args.project) as store:
        jobs = store.jobs.all()
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
        check = learning_check(job)
        if check is not None and check.flagged:
            stdout.print(f"\n[bold]job {job.id} ({job.kind} {escape(job.run)})[/bold]: "
                         f"{escape(check.line('its student'))}", highlight=False, soft_wrap=True)
    for job in jobs:
        if job.status in ("failed", "lost"):
            stdout.print(f"\n[bold]job {job.id} {job.status}[/bold]"
                         + (f": {escape(job.error)}" if job.error else "")
                         + ("; last lines of its log:" if job.log_tail else ""), soft_wrap=True)
            for line in (job.log_tail or [])[-LOG_LINES_SHOWN:]:
                stdout.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
            hint = resume_command(job.kind, str(args.project), job.settings)
            stdout.print(f"  resume with: {hint}", highlight=False, markup=False, soft_wrap=True)
    return 0


def jobs_table(jobs):
    """A table of jobs: id, kind, run, status, progress, start, duration, device."""
    import time

    from rich.table import Table

    from kiwb.project.jobs import format_duration

    table = Table("job", "kind", "run", "status", "progress", "started", "duration", "device")
    for job in jobs:
        progress = job.progress
        shown = f"{progress['done']:,}/{progress['total']:,}" if progress else ""
        started = job.started_at or job.created_at
        check = learning_check(job)
        status = job.status + (check.mark if check is not None else "")
        table.add_row(
            str(job.id), job.kind, "" if job.kind == "score" else job.run, status, shown,
            time.strftime("%m-%d %H:%M", time.localtime(started)),
            format_duration(job.duration()), device_text(job),
        )
    return table


def learning_check(job):
    """The learning check a finished training job recorded, if any."""
    from kiwb.core.learning_check import check_of

    return check_of(job.ending) if job.kind == "train" else None


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


def cmd_logs(args: argparse.Namespace) -> int:
    import sys

    from kiwb.launch import follow_log

    with _open_store(args.project) as store:
        for chunk in follow_log(store.jobs, args.job, follow=args.follow):
            sys.stdout.write(chunk)
            sys.stdout.flush()
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.launch import cancel_job

    with _open_store(args.project) as store:
        stdout.print(cancel_job(store, args.job), highlight=False)
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    quiet_libraries()
    import sys

    from kiwb.console import stdout
    from kiwb.workers.predict import predict_texts, resolve_model_folder

    texts = args.texts or [line.strip() for line in sys.stdin if line.strip()]
    if not texts:
        raise KiwbError("no texts to classify; pass them as arguments or one per line on stdin")
    folder = resolve_model_folder(args.model, args.run)
    for text, ranked in zip(texts, predict_texts(folder, texts, top=args.top), strict=True):
        shown = "  ".join(f"{label} {100 * prob:.1f}%" for label, prob in ranked)
        stdout.print(f"[bold]{ranked[0][0]}[/bold]\t{shown}\t{text[:60]}", highlight=False)
    return 0


def cmd_teach(args: argparse.Namespace) -> int:
    quiet_libraries()
    import math

    from kiwb.console import console, progress_bar
    from kiwb.core.learning_check import check_of
    from kiwb.workers.data import load_table
    from kiwb.workers.runtime import prepare_device, resolve_device
    from kiwb.workers.teach import TeachSettings, subset_rows, teach

    _check_teacher_destination(args.out, args.force)
    labels = [label.strip() for label in args.labels.split(",") if label.strip()]
    columns = {"text_column": args.text_column, "label_column": args.label_column}
    train = load_table(str(args.data), role="teach", **columns)
    dev = load_table(str(args.dev), role="teach", **columns) if args.dev else None
    settings = TeachSettings(epochs=args.epochs, learning_rate=args.learning_rate,
                             batch_size=args.batch_size, max_length=args.max_length, seed=args.seed)
    rows = len(subset_rows(train, labels)[0])
    total = max(1, math.ceil(settings.epochs * math.ceil(rows / settings.batch_size)))
    device = resolve_device(args.device)
    prepare_device(device)
    console.print(f"Teaching {', '.join(labels)} from {rows:,} texts on {device}")
    with progress_bar("teach", total=total, unit="steps") as advance:
        best = teach(args.base, labels, train, dev, args.out, settings, device,
                     progress=lambda n, loss: advance(f"teach · loss {loss:.4f}", n))
    if best.get("accuracy") is not None:
        console.print(f"Best dev accuracy {100 * best['accuracy']:.2f}% at step {best['step']}")
    console.print(f"Wrote {args.out}")
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
    from kiwb.project.config import load_config
    from kiwb.report import evaluation_table
    from kiwb.workers.data import load_table
    from kiwb.workers.evaluate import evaluate_checkpoint
    from kiwb.workers.export import choose_checkpoint
    from kiwb.workers.project_inputs import load_dataset_role
    from kiwb.workers.runtime import prepare_device, resolve_device

    config = load_config(args.project)
    if args.data is not None:
        table = load_table(str(args.data), text_column=args.text_column,
                           label_column=args.label_column, role="evaluate")
    else:
        table = load_dataset_role(config, "eval")
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
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    root = args.project.resolve()
    if not root.is_dir():
        raise KiwbError(f"{args.project}: no such folder; create a project there with: "
                        f"kiwb init {args.project}")
    from kiwb.tui import run

    return run(root, theme=args.theme, pane=args.pane)


def cmd_demo(args: argparse.Namespace) -> int:
    from kiwb.demo.command import run_demo

    return run_demo(args.project, no_ui=args.no_ui, quick=args.quick)
