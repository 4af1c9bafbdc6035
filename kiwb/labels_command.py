"""`kiwb labels list|export|import|history|restore`: the labels given to texts, on the
command line.

The same store functions the workbench's Conflicts pane calls (kiwb.project.labels); a label
file is read and checked whole before anything is stored.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kiwb.errors import KiwbError
from kiwb.project.backups import back_up
from kiwb.project.labels import GivenLabel, text_hash

TEXT_CHARS = 70


def add_labels_parser(commands) -> None:
    labels = commands.add_parser(
        "labels", help="list, export or import the labels given to texts (the workbench's "
        "Conflicts pane gives them too)")
    actions = labels.add_subparsers(dest="labels_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the labels given, newest last")
    listing.add_argument("project", nargs="?", default=".", type=Path,
                         help="project folder (default: the current folder)")
    listing.add_argument("--json", action="store_true", help="print the labels as JSON")
    export = actions.add_parser("export", help="write the labels to a .csv or .jsonl file "
                                "(text, label, given_at, user, host; label none: none of these)")
    export.add_argument("project", type=Path, help="project folder")
    export.add_argument("file", type=Path, help="the .csv or .jsonl file to write")
    imports = actions.add_parser("import", help="add labels from a .csv or .jsonl file with text "
                                 "and label columns (label none: none of these labels)")
    imports.add_argument("project", type=Path, help="project folder")
    imports.add_argument("file", type=Path, help="the .csv or .jsonl file to read")
    imports.add_argument("--replace", action="store_true",
                         help="forget every label given before, then import")
    imports.add_argument("--text-column", default="text", help="text column (default: text)")
    imports.add_argument("--label-column", default="label", help="label column (default: label)")
    history = actions.add_parser("history", help="the sets of labels kept before each import, "
                                 "restore and workbench session changed them")
    history.add_argument("project", nargs="?", default=".", type=Path,
                         help="project folder (default: the current folder)")
    restoring = actions.add_parser("restore", help="put back a set of labels from the history "
                                   "(the labels as they are now are kept in it first)")
    restoring.add_argument("project", type=Path, help="project folder")
    restoring.add_argument("set", type=int, help="the set's number, as kiwb labels history "
                           "lists it")


def run_labels(args: argparse.Namespace) -> int:
    return {"list": list_labels, "export": export_labels, "import": import_labels,
            "history": list_history, "restore": restore_labels}[args.labels_action](args)


def _store(project: Path):
    from kiwb.project.opening import open_project

    return open_project(project)


def list_labels(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project.labels import all_labels

    _config, store = _store(args.project)
    with store:
        given = all_labels(store.connection)
    if args.json:
        print(json.dumps([{"text": item.text, "label": item.shown, "given_at": item.given_at,
                           "user": item.user, "host": item.host} for item in given], indent=2))
        return 0
    if not given:
        stdout.print("No labels yet: give them in the workbench's Conflicts pane, or run "
                     "kiwb labels import DIR FILE.")
        return 0
    stdout.print(labels_table(given))
    counts: dict[str, int] = {}
    for item in given:
        counts[item.shown] = counts.get(item.shown, 0) + 1
    stdout.print(", ".join(f"{name} {count}" for name, count in sorted(counts.items())),
                 highlight=False)
    return 0


def labels_table(given: list[GivenLabel]):
    """The labels given: label, text, by whom. The label is what the list is for, so it and
    `by` keep their width on a narrow terminal and the text is cut."""
    from rich.markup import escape

    from kiwb.console import FittedTable

    table = FittedTable("label", "text", "by", cut=("text",), title=f"{len(given):,} labels",
                        title_justify="left")
    for item in given:
        text = item.text.replace("\n", " ")
        text = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"
        table.add_row(escape(item.shown), text, escape(f"{item.user}@{item.host}"))
    return table


def export_labels(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project.label_files import file_format, write_label_file
    from kiwb.project.labels import all_labels

    file_format(args.file)  # refuse a bad suffix before opening anything
    _config, store = _store(args.project)
    with store:
        given = all_labels(store.connection)
    written = write_label_file(args.file, given)
    stdout.print(f"wrote {written:,} labels to {args.file}", highlight=False)
    return 0


def import_labels(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.kinds import kind_named
    from kiwb.project.label_files import file_format, read_label_file
    from kiwb.project.labels import give_labels, label_count, replace_all
    from kiwb.workers.kind_runtimes import runtime_of
    from kiwb.workers.project_inputs import project_kind

    file_format(args.file)
    config, store = _store(args.project)
    with store:
        decisions = read_label_file(args.file, known_labels(config), text_column=args.text_column,
                                    label_column=args.label_column)
        if not decisions:  # an empty file, a header alone, blank lines: never a set of labels
            given = label_count(store.connection)
            raise KiwbError(f"{args.file} holds no labels (no line with a text and a label); "
                            "nothing changed" + (f": --replace would have forgotten the {given:,} "
                                                 "labels given" if args.replace and given else ""))
        kind = kind_named(project_kind(config))
        # refused before anything is written; then each one matches a text
        checked = runtime_of(kind).check_labels(args.file, decisions, config)
        # the labels before are kept in the history either way (kiwb labels history, restore)
        if args.replace:
            replace_all(store.connection, decisions,
                        reason=f"kiwb labels import --replace {args.file}")
        else:
            give_labels(store.connection, decisions, keep=f"kiwb labels import {args.file}")
        back_up(store.connection, config.root, "kiwb labels import")
    last = {text_hash(item.text): item.label for item in decisions}  # a later line wins
    none = sum(1 for label in last.values() if label is None)
    stdout.print(f"imported {len(last):,} labels from {args.file}"
                 + (f" ({none:,} none of these labels)" if none else "")
                 + (f"; {len(decisions) - len(last):,} more line(s) named a text already "
                    "named (the last line counts)" if len(decisions) > len(last) else "")
                 + ("; the labels given before were replaced" if args.replace else ""),
                 highlight=False)
    unmatched = 0 if checked else (unmatched_texts(config, set(last)) or 0)
    if unmatched:
        stdout.print(f"{unmatched:,} of them match no text of the project's data: kiwb finds a "
                     "text by its exact content (spaces and case included); they are kept, and "
                     "count once a data set holds them", highlight=False)
    return 0


def list_history(args: argparse.Namespace) -> int:
    import datetime

    from kiwb.console import FittedTable, stdout
    from kiwb.project.labels import label_history

    _config, store = _store(args.project)
    with store:
        kept = label_history(store.connection)
    if not kept:
        stdout.print("No label set kept yet: one is kept before each import, restore and "
                     "workbench session changes the labels.")
        return 0
    table = FittedTable("set", "kept at", "labels", "replaced by", "by", wrap=("replaced by",),
                        title="Label history (kiwb labels restore DIR SET puts one back)",
                        title_justify="left")
    for item in kept:
        when = datetime.datetime.fromtimestamp(item.taken_at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(str(item.id), when, f"{item.labels:,}", item.reason,
                      f"{item.user}@{item.host}")
    stdout.print(table)
    return 0


def restore_labels(args: argparse.Namespace) -> int:
    from kiwb.console import stdout
    from kiwb.project.labels import restore_set

    _config, store = _store(args.project)
    with store:
        try:
            count = restore_set(store.connection, args.set)
        except ValueError as error:
            raise KiwbError(f"{args.project}: {error}; kiwb labels history lists the sets") from None
        back_up(store.connection, args.project, f"kiwb labels restore {args.set}")
    stdout.print(f"restored {count:,} labels from set {args.set}; the labels before are kept "
                 "in the history", highlight=False)
    return 0


def project_text_hashes(config) -> set[str] | None:
    """Hashes of every text of the project's data sets (None: a data file cannot be read now,
    which kiwb score says in full; the labels are stored either way)."""
    from kiwb.workers.project_inputs import load_datasets

    try:
        tables = load_datasets(config)
    except KiwbError:
        return None
    return {text_hash(text) for table in tables.values() for text in table.texts}


def unmatched_texts(config, hashes: set[str]) -> int | None:
    """How many labeled texts match no text of the project (None: unknown now)."""
    known = project_text_hashes(config)
    return len(hashes - known) if known is not None else None


def known_labels(config) -> list[str]:
    """The union of the teachers' labels, in kiwb's order: what a label may be."""
    from kiwb.core.labels import union_labels
    from kiwb.kinds import kind_named
    from kiwb.workers.project_inputs import inspect_teachers, project_kind
    from kiwb.workers.quiet import quiet_libraries

    if not config.teachers:
        raise KiwbError(f"{config.file}: no [[teachers]] yet, so no label is known; add the "
                        "teachers first")
    quiet_libraries()
    union = union_labels([list(info.known) for info in inspect_teachers(config)])
    # what a conflict of the teachers' kind may be given (embedding: a judgement of a pair)
    return kind_named(project_kind(config)).jobs.conflict_labels(None, union)
