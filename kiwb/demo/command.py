"""`kiwb demo [PATH] [--kind KIND] [--no-ui]`: build the demo project, then open the workbench or
run it all."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kiwb.console import console, stdout
from kiwb.shell import command

QUICK_ENV = "KIWB_DEMO_QUICK"  # "1": the small recipe, as --quick does (for tests and CI)
RESULTS_FILE = "demo-results.json"  # the figures of the last headless run


TEXT_DEMO = "sequence"  # `kiwb demo` without --kind: single-label text classifiers
# The demos' names before they took the kinds' own (still read by --kind, not shown)
FORMER_NAMES = {"classification": "sequence", "ner": "token"}
# Folders that kept the former names, so a demo built before is found again
DEMO_FOLDERS = {"sequence": "demo", "token": "demo-ner"}


def default_demo_root(kind: str = TEXT_DEMO) -> Path:
    """The demo's folder when none is given: inside the user's data folder (one per kind: a
    folder holds one demo)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("kiwb")) / DEMO_FOLDERS.get(kind, f"demo-{kind}")


# Each kind's demo, by the kind's name (kiwb/kinds): (build module:function, recipe module,
# results table module). A demo is one kind's project built offline; the headless run is
# shared (kiwb.demo.headless).
DEMOS = {
    "sequence": ("kiwb.demo.build:build_demo", "kiwb.demo.recipe", "kiwb.demo.headless"),
    "token": ("kiwb.demo.ner_build:build_ner_demo", "kiwb.demo.ner_recipe",
              "kiwb.demo.ner_results"),
    "multi-label": ("kiwb.demo.multilabel_build:build_multilabel_demo",
                    "kiwb.demo.multilabel_recipe", "kiwb.demo.multilabel_results"),
    "multi-task": ("kiwb.demo.multitask_build:build_multitask_demo",
                   "kiwb.demo.multitask_recipe", "kiwb.demo.multitask_results"),
    "embedding": ("kiwb.demo.embedding_build:build_embedding_demo",
                  "kiwb.demo.embedding_recipe", "kiwb.demo.embedding_results"),
}


def demo_parts(kind: str) -> tuple:
    """What differs between the demos: (build function, full recipe, quick recipe)."""
    import importlib

    build, recipe, _ = DEMOS[kind]
    module, function = build.split(":")
    recipes = importlib.import_module(recipe)
    return getattr(importlib.import_module(module), function), recipes.FULL, recipes.QUICK


def demo_students(kind: str) -> tuple[dict[str, dict], str]:
    """The students a demo's headless run trains, and the one it exports (the recipe's own
    where it names them, else the text demo's)."""
    import importlib

    from kiwb.demo import recipe as text_demo

    recipes = importlib.import_module(DEMOS[kind][1])
    return (getattr(recipes, "STUDENTS", text_demo.STUDENTS),
            getattr(recipes, "EXPORTED", text_demo.EXPORTED))


def results_table_of(kind: str):
    """The function that draws a demo's results table from its headless figures."""
    import importlib

    return importlib.import_module(DEMOS[kind][2]).results_table


def run_demo(path: Path | None, *, no_ui: bool, quick: bool, kind: str = TEXT_DEMO) -> int:
    """Build (or reuse) the demo project; then open the workbench, or run everything headless."""
    from kiwb.workers.quiet import quiet_libraries

    quiet_libraries()
    from kiwb.demo.build import limit_cpu_threads, say_built
    from kiwb.workers.runtime import resolve_device

    build_demo, full, small = demo_parts(kind)
    root = (path or default_demo_root(kind)).expanduser().resolve()
    recipe = small if quick or os.environ.get(QUICK_ENV) == "1" else full
    device = resolve_device("auto")
    limit_cpu_threads(device)
    started = time.perf_counter()
    console.print(f"kiwb demo in {root}")
    say_built(build_demo(root, recipe, device))
    console.print(f"Demo project ready in {time.perf_counter() - started:.1f}s")
    if not no_ui:
        return open_workbench(root, kind)
    from kiwb.demo.headless import run_headless

    results_table = results_table_of(kind)
    started = time.perf_counter()
    students, exported = demo_students(kind)
    results = run_headless(root, students, exported)
    write_results(root / RESULTS_FILE, {**results, "recipe": recipe.key()})
    stdout.print(results_table(results))
    stdout.print(f"Exported the {exported} student to {results['exported']}", highlight=False)
    console.print(f"Headless run took {time.perf_counter() - started:.1f}s")
    return 0


def write_results(path: Path, results: dict) -> None:
    import json

    from kiwb.project.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(results, indent=2, default=str))


def open_workbench(root: Path, kind: str = TEXT_DEMO) -> int:
    """Open the workbench on the demo project, or say what to run where there is no terminal."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        from kiwb.tui import run  # what `kiwb ui` opens

        return run(root)
    kind_option = () if kind == TEXT_DEMO else ("--kind", kind)
    stdout.print(f"The demo project is ready: {root}\n"
                 f"Open the workbench on it in a terminal: {command('ui', root)}\n"
                 "or run the whole workflow headless:     "
                 + command("demo", root, *kind_option, "--no-ui"),
                 highlight=False, soft_wrap=True)
    return 0
