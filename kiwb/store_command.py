"""`kiwb store check|backups|restore|prune`: the project's store when something is wrong with
it: what SQLite finds, the copies kiwb kept (kiwb.project.backups), putting one back, and
removing the integrations' kept targets no run needs (kiwb.project.kept_targets)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kiwb.errors import KiwbError


def add_store_parser(commands) -> None:
    store = commands.add_parser("store", help="check the project's store, list the copies kiwb "
                                "kept of it, put one back, or prune the targets no run needs")
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
    pruning = actions.add_parser("prune", help="remove the integrations' kept targets "
                                 "(integrations/KEY.npz) no run needs: all but the newest "
                                 "integration's and those a run pins; the records stay, and a "
                                 "run that reads a pruned one works its targets out again")
    pruning.add_argument("project", nargs="?", default=".", type=Path,
                         help="project folder (default: the current folder)")
    pruning.add_argument("--dry-run", action="store_true", help="say what would be removed, "
                         "remove nothing")


def run_store(args: argparse.Namespace) -> int:
    return {"check": check, "backups": backups, "restore": restore,
            "prune": prune}[args.store_action](args)


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


def prune(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project import kept_targets
    from kiwb.project.opening import open_existing_store
    from kiwb.project.paths import ProjectPaths

    path = ProjectPaths(args.project).store
    if not args.dry_run:  # a job may be reading or writing a targets file
        refuse_while_jobs_run(path, "prune")
    with open_existing_store(args.project) as store:
        found = kept_targets.kept_targets(args.project, store)
    kept = [item for item in found if item.kept_for is not None]
    why = "; ".join(sorted({item.kept_for for item in kept}, key=kept_targets.NEWEST.__ne__))
    kept_line = f"kept {len(kept)}: {why}" if kept else "kept none"
    unneeded = [item for item in found if item.kept_for is None]
    if not unneeded:
        stdout.print(f"Nothing to remove in integrations/ ({kept_line}).", highlight=False)
        return 0
    if not args.dry_run:
        kept_targets.remove(unneeded)
    size = sum(item.size for item in unneeded)
    stdout.print(f"{'Would remove' if args.dry_run else 'Removed'} {len(unneeded)} files of "
                 f"integrations/ ({_megabytes(size)}) no run needs; {kept_line}. A run that reads "
                 "an integration whose targets are gone works them out again.",
                 highlight=False, soft_wrap=True)
    return 0


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB" if size >= 100_000 else f"{size / 1e3:,.1f} kB"


def refuse_while_jobs_run(path: Path, action: str = "restore") -> None:
    """A store a live job writes to is not replaced under it (a store too damaged to read
    says nothing of its jobs, and is put back), nor a file pruned that it may read."""
    import sqlite3

    from kiwb.project.store import Store

    try:
        with Store(path) as store:
            live = [job for job in store.jobs.all() if job.live]
    except (KiwbError, sqlite3.DatabaseError):
        return
    if live:
        raise KiwbError(f"job {live[0].id} ({live[0].label}) is {live[0].status} on this "
                        f"store; wait for it or kiwb cancel it, then {action}")
