"""`kiwb demo [PATH] [--no-ui]`: build the demo project, then open the workbench or run it all."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kiwb.console import console, stdout

QUICK_ENV = "KIWB_DEMO_QUICK"  # "1": the small recipe, as --quick does (for tests and CI)
RESULTS_FILE = "demo-results.json"  # the figures of the last headless run


def default_demo_root() -> Path:
    """The demo's folder when none is given: inside the user's data folder."""
    import platformdirs

    return Path(platformdirs.user_data_dir("kiwb")) / "demo"


def run_demo(path: Path | None, *, no_ui: bool, quick: bool) -> int:
    """Build (or reuse) the demo project; then open the workbench, or run everything headless."""
    from kiwb.workers.quiet import quiet_libraries

    quiet_libraries()
    from kiwb.demo.build import build_demo, limit_cpu_threads, say_built
    from kiwb.demo.recipe import EXPORTED, FULL, QUICK
    from kiwb.workers.runtime import resolve_device

    root = (path or default_demo_root()).expanduser().resolve()
    recipe = QUICK if quick or os.environ.get(QUICK_ENV) == "1" else FULL
    device = resolve_device("auto")
    limit_cpu_threads(device)
    started = time.perf_counter()
    console.print(f"kiwb demo in {root}")
    say_built(build_demo(root, recipe, device))
    console.print(f"Demo project ready in {time.perf_counter() - started:.1f}s")
    if not no_ui:
        return open_workbench(root)
    from kiwb.demo.headless import results_table, run_headless

    started = time.perf_counter()
    results = run_headless(root)
    write_results(root / RESULTS_FILE, {**results, "recipe": recipe.key()})
    stdout.print(results_table(results))
    stdout.print(f"Exported the {EXPORTED} student to {results['exported']}", highlight=False)
    console.print(f"Headless run took {time.perf_counter() - started:.1f}s")
    return 0


def write_results(path: Path, results: dict) -> None:
    import json

    from kiwb.project.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(results, indent=2, default=str))


def open_workbench(root: Path) -> int:
    """Open the workbench on the demo project, or say what to run where there is no terminal."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        from kiwb.tui import run  # what `kiwb ui` opens

        return run(root)
    stdout.print(f"The demo project is ready: {root}\n"
                 f"Open the workbench on it in a terminal: kiwb ui {root}\n"
                 f"or run the whole workflow headless:     kiwb demo {root} --no-ui",
                 highlight=False, soft_wrap=True)
    return 0
