"""The `kiwb` command line. Heavy libraries are imported inside the subcommands that need them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kiwb import __version__
from kiwb.errors import KiwbError


def _project_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?", default=".", type=Path,
                        help="project folder (default: the current folder)")


def _detach_arg(parser: argparse.ArgumentParser) -> None:
    """How a job runs: by default a background worker that outlives this terminal, followed here."""
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--detach", action="store_true",
                     help="start the background job and return at once; follow it with "
                     "kiwb jobs / kiwb logs")
    how.add_argument("--foreground", action="store_true",
                     help="run the job in this process (it stops if this terminal closes)")


def _job_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", type=int, help="job id (see kiwb jobs)")
    _project_arg(parser)


def _method_args(parser: argparse.ArgumentParser, methods: str) -> None:
    """The integration choices, shared by `integrate` and `train`."""
    parser.add_argument("--method", help=methods)
    parser.add_argument("--tau", type=float, help="MUKI-Soft temperature")
    parser.add_argument("--no-reweight", dest="reweight", action="store_const", const=False,
                        help="ablation: every text counts the same (no margin weights)")
    parser.add_argument("--no-mc", dest="use_mc", action="store_const", const=False,
                        help="ablation: route by plain (deterministic) entropy")
    from kiwb.core.choices import ROUTINGS

    parser.add_argument("--routing", choices=tuple(ROUTINGS), metavar="NAME",
                        help="how teachers are compared per text: "
                        + "; ".join(f"{name}: {text}" for name, text in ROUTINGS.items())
                        + " (default: [integration] routing)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kiwb",
        description="Knowledge Integration WorkBench: merge teacher classifiers into one "
        "student using Monte-Carlo-dropout uncertainty (MUKI).",
    )
    parser.add_argument("--version", action="version", version=f"kiwb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    init = commands.add_parser("init", help="create a project folder with a commented kiwb.toml")
    init.add_argument("project", type=Path, help="folder to create (or fill)")
    init.add_argument("--name", help="project name (default: the folder name)")
    init.add_argument("--teacher", action="append", default=[], metavar="NAME=PATH",
                      help="a teacher checkpoint folder or hub id (repeat for each teacher)")
    init.add_argument("--unlabeled", metavar="PATH", help="unlabeled texts (csv/jsonl/parquet/folder)")
    init.add_argument("--text-column", default="text", help="text column of the data (default: text)")
    init.add_argument("--eval", metavar="PATH", help="optional labeled evaluation data")
    init.add_argument("--label-column", default="label", help="label column of --eval (default: label)")
    init.add_argument("--student", metavar="PATH", help="base checkpoint of the student (a folder or hub id)")
    init.add_argument("--force", action="store_true", help="overwrite an existing kiwb.toml")

    score = commands.add_parser("score", help="MC-dropout scores of every text by every teacher")
    _project_arg(score)
    score.add_argument("--device", help="override [scoring] device (auto, cpu, cuda, cuda:N)")
    score.add_argument("--batch-size", type=int, help="override [scoring] batch_size")
    _detach_arg(score)

    integrate = commands.add_parser("integrate", help="integrate scores into training targets")
    _project_arg(integrate)
    _method_args(integrate, "muki-hard, muki-soft, vanilla-kd or uhc")
    integrate.add_argument("--threshold", type=float, dest="conflict_threshold",
                           help="margin under which a text counts as conflicting")
    integrate.add_argument("--json", action="store_true", help="print the summary as JSON")

    train = commands.add_parser("train", help="train the student on the integrated targets")
    _project_arg(train)
    train.add_argument("--run", help="run name (default: from the method, e.g. muki-hard)")
    _method_args(train, "muki-hard, muki-soft, vanilla-kd, uhc or supervised")
    train.add_argument("--student", help="override [training] student (base checkpoint)")
    train.add_argument("--epochs", type=float,
                       help="override [training] epochs (a run still takes min_steps steps or more)")
    train.add_argument("--min-steps", type=int, metavar="N",
                       help="override [training] min_steps (0: exactly --epochs)")
    train.add_argument("--device", help="override [training] device (auto, cpu, cuda, cuda:N)")
    train.add_argument("--resume", action="store_true", help="continue the run from its last checkpoint")
    _detach_arg(train)

    export = commands.add_parser("export", help="write a trained student as a Hugging Face model")
    _project_arg(export)
    export.add_argument("--run", required=True, help="the run to export")
    export.add_argument("--checkpoint", default="best", help="best (default), last, or a step number")
    export.add_argument("--to", dest="destination", type=Path, help="destination folder "
                        "(default: PROJECT/exports/RUN)")
    export.add_argument("--force", action="store_true", help="replace an existing destination")
    _detach_arg(export)

    jobs = commands.add_parser("jobs", help="list the project's jobs and their status")
    _project_arg(jobs)
    jobs.add_argument("--all", action="store_true", help="every job, not only live and recent ones")
    jobs.add_argument("--json", action="store_true", help="print the jobs as JSON")

    logs = commands.add_parser("logs", help="show the log of a background job")
    _job_args(logs)
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")

    cancel = commands.add_parser("cancel", help="stop a job after its current batch (twice: at once)")
    _job_args(cancel)

    evaluate = commands.add_parser("evaluate", help="evaluate a run's checkpoint on labeled data")
    _project_arg(evaluate)
    evaluate.add_argument("--run", required=True, help="the run to evaluate")
    evaluate.add_argument("--checkpoint", default="best", help="best (default), last, or a step number")
    evaluate.add_argument("--data", type=Path, help="labeled data (default: the project's [data.eval])")
    evaluate.add_argument("--text-column", default="text")
    evaluate.add_argument("--label-column", default="label")
    evaluate.add_argument("--json", action="store_true", help="print the figures as JSON")

    teach = commands.add_parser("teach", help="fine-tune a teacher on a subset of labels")
    teach.add_argument("--base", required=True, help="base checkpoint folder or hub id")
    teach.add_argument("--data", required=True, type=Path, help="labeled training data (csv/jsonl/parquet/folder)")
    teach.add_argument("--labels", required=True, help="comma-separated labels this teacher learns")
    teach.add_argument("--out", required=True, type=Path, help="folder to write the checkpoint to")
    teach.add_argument("--dev", type=Path, help="labeled dev data to pick the best epoch")
    teach.add_argument("--text-column", default="text")
    teach.add_argument("--label-column", default="label")
    teach.add_argument("--epochs", type=float, default=3.0)
    teach.add_argument("--learning-rate", type=float, default=5e-5)
    teach.add_argument("--batch-size", type=int, default=32)
    teach.add_argument("--max-length", type=int, default=128)
    teach.add_argument("--seed", type=int, default=0)
    teach.add_argument("--device", default="auto")
    teach.add_argument("--force", action="store_true", help="replace an existing --out folder")

    ui = commands.add_parser("ui", help="open the workbench on a project (also: kiwb, kiwb DIR)")
    _project_arg(ui)
    ui.add_argument("--theme", help="kiwb-dark (default), kiwb-light, kiwb-ansi or a theme of yours")
    ui.add_argument("--pane", choices=("teachers", "data", "jobs", "uncertainty", "accuracy",
                                       "conflicts", "export"), help="the pane to open first")

    demo = commands.add_parser("demo", help="build a small offline demo project and open the "
                               "workbench on it (--no-ui: run the whole workflow headless)")
    demo.add_argument("project", nargs="?", type=Path, help="folder of the demo project "
                      "(default: kiwb's folder in your user data folder)")
    demo.add_argument("--no-ui", action="store_true", help="score, integrate, train, evaluate "
                      "and export without the workbench, then print the results table")
    demo.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests and CI

    predict = commands.add_parser("predict", help="classify a few texts with a student")
    predict.add_argument("model", type=Path, help="an exported folder, a checkpoint folder, or a project")
    predict.add_argument("texts", nargs="*", help="texts to classify (default: one per line on stdin)")
    predict.add_argument("--run", help="with a project: the run (default: the newest)")
    predict.add_argument("--top", type=int, default=3, help="labels to show per text (default 3)")
    return parser


def _workbench_default(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`kiwb DIR` means `kiwb ui DIR`; a bare `kiwb` too, when a person runs it in a terminal."""
    commands = next(action.choices for action in parser._actions if action.dest == "command")
    if argv and not argv[0].startswith("-") and argv[0] not in commands:
        return ["ui", *argv]
    if not argv and sys.stdin.isatty() and sys.stdout.isatty():
        return ["ui"]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = _workbench_default(parser, sys.argv[1:] if argv is None else list(argv))
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "predict":
        args.texts += extra  # texts may come after options: kiwb predict DIR --run R "a text"
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return 0
    from kiwb import commands

    try:
        return getattr(commands, f"cmd_{args.command.replace('-', '_')}")(args) or 0
    except KiwbError as error:
        print(f"kiwb: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kiwb: interrupted", file=sys.stderr)
        return 130
