"""`kiwb store check|backups|restore`: the project's store when something is wrong with it:
what SQLite finds, the copies kiwb kept (kiwb.project.backups), and putting one back."""

from __future__ import annotations

import argparse
from pathlib import Path

from kiwb.errors import KiwbError


def add_store_parser(commands) -> None:
    store = commands.add_parser("store", help="check the project's store, list the copies kiwb "
                                "kept of it, or put one back")
    actions = store.add_subparsers(dest="store_action", metavar="ACTION", required=True)
    for name, text in (("check", "what SQLite's integrity check finds wrong with the store"),
                       ("backups", "the copies of the store kept after the last jobs")):
        action = actions.add_parser(name, help=text)
        action.add_argument("project", nargs="?", default=".", type=Path,
                            help="project folder (default: the current folder)")
    restoring = actions.add_parser("restore", help="put back a copy as the store (the newest "
                                   "by default); the store it replaces is moved aside, not "
                                   "deleted")
    restoring.add_argument("project", type=Path, help="project folder")
    restoring.add_argument("--from", dest="backup", metavar="NAME",
                           help="the copy to put back, as kiwb store backups names it")


def run_store(args: argparse.Namespace) -> int:
    return {"check": check, "backups": backups, "restore": restore}[args.store_action](args)


def check(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project.backups import integrity_problems
    from kiwb.project.paths import ProjectPaths

    path = ProjectPaths(args.project).store
    if not path.is_file():
        raise KiwbError(f"{path}: no store here (kiwb store backups lists the copies kept)")
    problems = integrity_problems(path)
    if problems:
        raise KiwbError(f"{path}: damaged ({'; '.join(problems)}); put back the copy kept "
                        f"after the last job with: kiwb store restore {args.project}")
    stdout.print(f"{path}: ok (SQLite's integrity check finds nothing wrong)", highlight=False)
    return 0


def backups(args: argparse.Namespace) -> int:
    from kiwb.console import FittedTable, stdout
    from kiwb.project.backups import KEEP, list_backups

    kept = list_backups(args.project)
    if not kept:
        stdout.print("No copy kept yet: kiwb keeps one after each job.")
        return 0
    table = FittedTable("copy (kiwb store restore DIR --from COPY)", "size", "taken after",
                        wrap=("taken after",), title_justify="left",
                        title=f"Copies of the store, oldest first (the newest {KEEP} are kept)")
    for item in kept:
        table.add_row(item.path.name, f"{item.size / 1e6:,.1f} MB", item.after)
    stdout.print(table)
    return 0


def restore(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project import backups as kept
    from kiwb.project.paths import ProjectPaths

    refuse_while_jobs_run(ProjectPaths(args.project).store)
    backup, aside = kept.restore(args.project, args.backup)
    stdout.print(f"Put back {backup.path.name} (taken after {backup.after or 'a job'}) as the "
                 "store" + (f"; the store it replaced is kept as {aside.name}" if aside else "")
                 + ". Work finished after that copy was taken is not in it: kiwb score finds "
                 "the scores kept on disk again.", highlight=False, soft_wrap=True)
    return 0


def refuse_while_jobs_run(path: Path) -> None:
    """A store a live job writes to is not replaced under it (a store too damaged to read
    says nothing of its jobs, and is put back)."""
    import sqlite3

    from kiwb.project.store import Store

    try:
        with Store(path) as store:
            live = [job for job in store.jobs.all() if job.live]
    except (KiwbError, sqlite3.DatabaseError):
        return
    if live:
        raise KiwbError(f"job {live[0].id} ({live[0].label}) is {live[0].status} on this "
                        "store; wait for it or kiwb cancel it, then restore")
