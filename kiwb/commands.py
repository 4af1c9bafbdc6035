"""CLI subcommand handlers: parse nothing, call the same functions the workbench calls."""

from __future__ import annotations

import argparse
import json

from kiwb.errors import KiwbError


def quiet_libraries() -> None:
    """Silence library progress bars and advisories; kiwb shows its own progress."""
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


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
        unlabeled=unlabeled, eval=evaluation, force=args.force,
    )
    ProjectPaths(root).make_layout()
    stdout.print(f"Created {written}")
    stdout.print(f"Next: edit it if needed, then run [bold]kiwb score {args.project}[/bold]")
    return 0


def open_project(project):
    """Load and validate a project's config, then open its store (created on first use)."""
    from kiwb.project.config import load_config
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    config = load_config(project)
    paths = ProjectPaths(config.root)
    paths.make_layout()
    return config, Store(paths.store)


def cmd_score(args: argparse.Namespace) -> int:
    import dataclasses

    from kiwb.console import console, progress_bar

    quiet_libraries()
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.score import pending_texts, plan_scoring, register_tasks, run_scoring

    config, store = open_project(args.project)
    overrides = {k: v for k, v in (("device", args.device), ("batch_size", args.batch_size)) if v}
    if overrides:
        config = dataclasses.replace(config, scoring=dataclasses.replace(config.scoring, **overrides))
    device = resolve_device(config.scoring.device)
    with store:
        tasks = plan_scoring(config, store)
        register_tasks(store, tasks)
        todo = pending_texts(store, tasks)
        if todo == 0:
            console.print("All scores are up to date (cached); nothing to do.")
            return 0
        console.print(
            f"Scoring {todo:,} text×teacher pairs on {device} "
            f"(K = {config.scoring.mc_passes} MC-dropout passes each)"
        )
        with progress_bar("scoring", total=todo) as advance:
            run_scoring(config, store, tasks, device=device, progress=advance)
        left = pending_texts(store, tasks)
    if left:
        console.print(f"{left:,} pairs are being scored by another process; run again to finish.")
        return 1
    console.print(f"Done. Next: [bold]kiwb integrate {args.project}[/bold]")
    return 0


def cmd_integrate(args: argparse.Namespace) -> int:
    quiet_libraries()
    from kiwb.console import stdout
    from kiwb.report import integration_tables
    from kiwb.workers.integrate import IntegrationSettings, run_integration

    config, store = open_project(args.project)
    settings = IntegrationSettings.from_config(
        config, method=args.method, tau=args.tau, reweight=args.reweight, use_mc=args.use_mc,
        conflict_threshold=args.conflict_threshold,
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
    quiet_libraries()
    from kiwb.console import console, progress_bar
    from kiwb.workers.integrate import IntegrationSettings
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.train import (
        Trainer,
        TrainRequest,
        default_run_name,
        prepare,
        with_training_overrides,
    )

    config, store = open_project(args.project)
    config = with_training_overrides(config, student=args.student, epochs=args.epochs,
                                     device=args.device)
    settings = IntegrationSettings.from_config(config, method=args.method, tau=args.tau,
                                               reweight=args.reweight, use_mc=args.use_mc)
    request = TrainRequest(run=args.run or default_run_name(settings), settings=settings,
                           resume=args.resume)
    device = resolve_device(config.training.device)
    with store:
        trainer = Trainer(config, store, request, prepare(config, store, request), device)
        trainer.setup()
        remaining = trainer.total_steps - trainer.step
        console.print(f"Training run [bold]{request.run}[/bold] ({settings.method}) on {device}: "
                      f"{len(trainer.data.texts):,} texts, {remaining:,} of {trainer.total_steps:,} steps to go")
        with progress_bar(f"train {request.run}", total=remaining, unit="steps") as advance:
            result = trainer.run(progress=lambda n, loss: advance(f"train {request.run} · loss {loss:.4f}", n))
    best = result["best"] or {}
    if best.get("accuracy") is not None:
        console.print(f"Best eval accuracy {100 * best['accuracy']:.2f}% at step {best['step']}")
    console.print(f"Done. Export it with: [bold]kiwb export {args.project} --run {request.run}[/bold]")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    quiet_libraries()
    from kiwb.console import console
    from kiwb.project.config import load_config
    from kiwb.project.paths import ProjectPaths
    from kiwb.workers.export import export_student

    config = load_config(args.project)
    destination = (args.destination or ProjectPaths(config.root).exports / args.run).resolve()
    export_student(config.root, args.run, destination, checkpoint=args.checkpoint, force=args.force)
    console.print(f"Exported run {args.run} to {destination}")
    console.print("Load it with:\n  from transformers import pipeline\n"
                  f"  classify = pipeline(\"text-classification\", model=\"{destination}\")")
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
