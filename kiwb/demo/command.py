"""`kiwb demo [PATH] [--no-ui]`: build the demo project, then open the workbench or run it all."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kiwb.console import console, stdout

QUICK_ENV = "KIWB_DEMO_QUICK"  # "1": the small recipe, as --quick does (for tests and CI)


def default_demo_root() -> Path:
    """The demo's folder when none is given: inside the user's data folder."""
    import platformdirs

    return Path(platformdirs.user_data_dir("kiwb")) / "demo"


def run_demo(path: Path | None, *, no_ui: bool, quick: bool) -> int:
    """Build (or reuse) the demo project; then open the workbench, or run everything headless."""
    from kiwb.commands import quiet_libraries

    quiet_libraries()
    from kiwb.demo.recipe import FULL, QUICK
    from kiwb.workers.demo import build_demo, limit_cpu_threads, say_built
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
    stdout.print(results_table(results))
    stdout.print(f"Exported the MUKI-Hard student to {results['exported']}", highlight=False)
    console.print(f"Headless run took {time.perf_counter() - started:.1f}s")
    return 0


def open_workbench(root: Path) -> int:
    """Open the workbench on the demo project."""
    # The single place `kiwb demo` opens the UI: call the workbench's entry here once
    # kiwb/tui has one. Until then it says how to run the workflow from the shell.
    stdout.print(f"The demo project is ready: {root}\n"
                 "Run the workflow on it:\n"
                 f"  kiwb score {root}\n  kiwb integrate {root}\n  kiwb train {root}\n"
                 f"  kiwb export {root} --run muki-hard\n"
                 f"or all of it at once: kiwb demo {root} --no-ui", highlight=False, soft_wrap=True)
    return 0
