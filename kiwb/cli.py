"""The `kiwb` command line. Heavy libraries are imported inside the subcommands that need them."""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
from pathlib import Path

from kiwb import __version__
from kiwb.errors import KiwbError, spelt_near
from kiwb.project.job_specs import (
    ExportSpec,
    IntegrateSpec,
    MergeSpec,
    ScoreSpec,
    TeachSpec,
    TrainSpec,
)


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


def _job_args(parser: argparse.ArgumentParser, without: str) -> None:
    # a string, not type=int: `kiwb logs DIR` (a folder where the id goes) reads as the project
    parser.add_argument("job", nargs="?", help=f"job id (see kiwb jobs; default: {without})")
    _project_arg(parser)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a choice (a routing, an action) ends with the one
    meant where the word given is spelt near one; its subcommands' parsers are of this class
    too (add_subparsers makes them of the parent's)."""

    def error(self, message: str):
        refused = re.search(r"invalid choice: (.+?) \(choose from (.+)\)$", message)
        if refused:
            def bare(word: str) -> str:
                return word.strip().strip("'\"")

            near = spelt_near(bare(refused.group(1)),
                              [bare(word) for word in refused.group(2).split(",")])
            message += f"; did you mean {near}?" if near else ""
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
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
    ScoreSpec.add_arguments(score)
    _detach_arg(score)

    integrate = commands.add_parser("integrate", help="integrate scores into training targets")
    _project_arg(integrate)
    IntegrateSpec.add_arguments(integrate)
    integrate.add_argument("--json", action="store_true", help="print the summary as JSON")
    _detach_arg(integrate)

    train = commands.add_parser("train", help="train the student on the integrated targets")
    _project_arg(train)
    TrainSpec.add_arguments(train)
    _detach_arg(train)

    merge = commands.add_parser("merge", help="merge the teachers' weights into one union "
                                "classifier, without training (a baseline, or a student's start)")
    _project_arg(merge)
    MergeSpec.add_arguments(merge)
    _detach_arg(merge)

    export = commands.add_parser("export", help="write a trained student as a Hugging Face model")
    _project_arg(export)
    ExportSpec.add_arguments(export)
    _detach_arg(export)

    jobs = commands.add_parser("jobs", help="list the project's jobs and their status")
    _project_arg(jobs)
    jobs.add_argument("--all", action="store_true", help="every job, not only live and recent ones")
    jobs.add_argument("--json", action="store_true", help="print the jobs as JSON")

    logs = commands.add_parser("logs", help="show the log of a background job")
    _job_args(logs, "the newest job")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")

    cancel = commands.add_parser("cancel", help="stop a job after its current batch (twice: at once)")
    _job_args(cancel, "the job that is running, if only one is")

    evaluate = commands.add_parser("evaluate", help="evaluate a run's checkpoint on labeled data")
    _project_arg(evaluate)
    evaluate.add_argument("--run", help="the run to evaluate (default: the newest)")
    evaluate.add_argument("--checkpoint", default="best", help="best (default), last, or a step number")
    evaluate.add_argument("--data", help="labeled data: a file, a saved folder or "
                          "hf://datasets/ORG/NAME (default: the project's [data.eval])")
    evaluate.add_argument("--split", help="split of --data to read, where it has several")
    evaluate.add_argument("--subset", help="subset of a Hub data set --data, where it has several")
    evaluate.add_argument("--text-column", default="text", help="the text column of --data (default: text)")
    evaluate.add_argument("--label-column", help="the gold labels column of --data (default: "
                          "[data.eval]'s, else label; multi-label: a list per row, or a string "
                          "split by [data.eval] label_separator)")
    evaluate.add_argument("--tokens-column", help="NER students: the words column of --data "
                          "(default: [data.eval]'s, else tokens)")
    evaluate.add_argument("--tags-column", help="NER students: the gold tags column of --data "
                          "(default: [data.eval]'s, else tags)")
    evaluate.add_argument("--json", action="store_true", help="print the figures as JSON")

    teach = commands.add_parser("teach", help="fine-tune a teacher on a subset of labels")
    TeachSpec.add_arguments(teach)

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
    from kiwb.demo.command import DEMOS, FORMER_NAMES, TEXT_DEMO

    demo.add_argument("--kind", choices=tuple(DEMOS), metavar="KIND",
                      type=lambda name: FORMER_NAMES.get(name, name), default=TEXT_DEMO,
                      help="the demo's teachers, by their kind: sequence (single-label text "
                      "classifiers, the default), token (NER taggers), multi-label, multi-task "
                      "(teachers of two tasks) or embedding (sentence encoders), each demo in "
                      "its own folder")
    demo.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests and CI

    from kiwb.labels_command import add_labels_parser
    from kiwb.serve_command import add_serve_parser
    from kiwb.store_command import add_store_parser

    add_labels_parser(commands)
    add_store_parser(commands)
    add_serve_parser(commands)

    predict = commands.add_parser("predict", help="classify a few texts with a student")
    predict.add_argument("model", type=Path, help="an exported folder, a checkpoint folder, or a project")
    predict.add_argument("texts", nargs="*", help="texts to classify (default: one per line on stdin)")
    predict.add_argument("--run", help="with a project: the run (default: the newest)")
    predict.add_argument("--top", type=int, default=3, help="labels to show per text (default 3)")
    return parser


# Words other tools use for what a kiwb command does: `kiwb status` is answered with `kiwb jobs`.
OTHER_TOOLS_WORDS = {"status": "jobs", "ps": "jobs", "log": "logs", "eval": "evaluate",
                     "run": "train", "fit": "train", "new": "init", "create": "init",
                     "open": "ui", "stop": "cancel", "kill": "cancel", "classify": "predict"}


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    return list(_subcommands(parser))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands (kiwb's commands, or a command's actions) by name."""
    return next((action.choices for action in parser._actions
                 if isinstance(action, argparse._SubParsersAction)), {})


# What `kiwb labels` and `kiwb store` do given a folder (or nothing) where the action goes:
# the action that only reads.
DEFAULT_ACTIONS = {"labels": "list", "store": "check"}


def _default_action(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`kiwb labels [DIR]` means `kiwb labels list [DIR]`, `kiwb store [DIR]` `kiwb store check
    [DIR]`."""
    if not argv or argv[0] not in DEFAULT_ACTIONS:
        return argv
    rest = argv[1:]
    actions = _subcommands(_subcommands(parser)[argv[0]])
    if not rest or (not rest[0].startswith("-") and rest[0] not in actions
                    and Path(rest[0]).is_dir()):
        return [argv[0], DEFAULT_ACTIONS[argv[0]], *rest]
    return argv


def unknown_command(word: str, commands: list[str]) -> str | None:
    """Why `kiwb WORD` cannot run, where WORD is no command and no folder but reads as a command
    (a bare word: no path separator), with the command it likely meant; None otherwise, and
    `kiwb WORD` opens (or refuses) the folder WORD as the workbench does."""
    if os.sep in word or "/" in word or Path(word).exists():
        return None
    meant = OTHER_TOOLS_WORDS.get(word.lower()) or spelt_near(word.lower(), commands)
    if meant is None:
        return None
    return (f"{word!r} is neither a command nor a folder: did you mean kiwb {meant}? (kiwb --help "
            f"lists the commands; kiwb init {word} creates a project folder of that name)")


def _folder_word(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The first word where it is no command and no option: the folder of `kiwb DIR`."""
    if argv and not argv[0].startswith("-") and argv[0] not in _commands(parser):
        return argv[0]
    return None


def _workbench_default(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`kiwb DIR` means `kiwb ui DIR`; a bare `kiwb` too, when a person runs it in a terminal."""
    if _folder_word(parser, argv) is not None:
        return ["ui", *argv]
    if not argv and sys.stdin.isatty() and sys.stdout.isatty():
        return ["ui"]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    word = _folder_word(parser, argv)
    mistyped = unknown_command(word, _commands(parser)) if word is not None else None
    if mistyped is not None:
        print(f"kiwb: error: {mistyped}", file=sys.stderr)
        return 2
    argv = _default_action(parser, _workbench_default(parser, argv))
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
        code = getattr(commands, f"cmd_{args.command.replace('-', '_')}")(args) or 0
        sys.stdout.flush()  # a reader gone away shows here, inside the handlers below
        return code
    except KiwbError as error:
        print(f"kiwb: error: {error}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as error:  # a store damaged past its first pages
        if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
            raise
        project = getattr(args, "project", None) or "PROJECT"
        print(f"kiwb: error: the project store could not be read ({error}); kiwb store check "
              f"{project} says what is wrong, kiwb store restore {project} puts back the copy "
              "kept after the last job", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kiwb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`kiwb evaluate --json | head`): nothing is left to tell it; point
        # stdout at nothing so the exit's flush stays quiet too, and exit 1 as Rich does for
        # what it prints (Console.on_broken_pipe) and as Python's own docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
