"""The picture of the workbench in the README and the docs (docs/workbench.svg), made again from the demo.

    python docs/make_screenshot.py [--demo build/demo] [--quick] [--pane uncertainty]

Unless the demo folder already holds an integration, it first runs the real demo headless
(`kiwb demo FOLDER --no-ui`: build, score, integrate, train, export). Then it opens the
real workbench headless at 120×40 on the pane, waits for the pane's figures, and saves the
screen as SVG. Nothing here imports torch: the demo runs in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kiwb.project.queries import latest_integration, open_store
from kiwb.tui.app import WorkbenchApp
from kiwb.tui.panes.accuracy import AccuracyPane
from kiwb.tui.panes.conflicts import ConflictsPane
from kiwb.tui.panes.uncertainty import UncertaintyPane
from kiwb.tui.themes import package_themes_folder

DOCS = Path(__file__).resolve().parent
SIZE = (120, 40)
TIMEOUT_S = 30.0


def _uncertainty_ready(app: WorkbenchApp) -> bool:
    pane = app.screen.query_one(UncertaintyPane)
    return pane.summary is not None and bool(pane.histograms.teachers())


def _accuracy_ready(app: WorkbenchApp) -> bool:
    pane = app.screen.query_one(AccuracyPane)
    return pane.summary is not None and len(pane.runs) > 0


def _conflicts_ready(app: WorkbenchApp) -> bool:
    pane = app.screen.query_one(ConflictsPane)
    return pane.total is not None and not pane.loading


# What must have arrived from the store before each pane is worth a picture.
READY: dict[str, Callable[[WorkbenchApp], bool]] = {
    "uncertainty": _uncertainty_ready, "accuracy": _accuracy_ready, "conflicts": _conflicts_ready}


def integrated(root: Path) -> bool:
    """Whether the project's store holds an integration (the uncertainty pane's figures)."""
    with open_store(root) as store:
        return store is not None and latest_integration(store) is not None


def ensure_demo(root: Path, quick: bool) -> None:
    """Build the demo and run its workflow headless through the real CLI, unless done before."""
    if integrated(root):
        return
    command = [sys.executable, "-m", "kiwb", "demo", str(root), "--no-ui"]
    subprocess.run(command + (["--quick"] if quick else []), check=True)


async def capture(root: Path, pane: str = "uncertainty", size: tuple[int, int] = SIZE,
                  theme: str = "kiwb-dark") -> str:
    """The workbench on `root`, opened headless on `pane`, as SVG once its data is shown."""
    app = WorkbenchApp(root, theme=theme, pane=pane, theme_folders=[package_themes_folder()])
    ready = READY[pane]
    async with app.run_test(size=size) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT_S
        while not ready(app):
            if loop.time() > deadline:
                raise TimeoutError(f"the {pane} pane showed nothing from {root} in {TIMEOUT_S:g}s")
            await pilot.pause(0.05)
        # Drawing follows the data by a refresh or two; tables size their columns on idle.
        await pilot.pause(0.3)
        return app.export_screenshot(title="kiwb")


def save_screenshot(root: Path, out: Path, pane: str = "uncertainty",
                    size: tuple[int, int] = SIZE, theme: str = "kiwb-dark") -> Path:
    """Write the SVG of `pane` on the project `root` to `out`; returns `out`."""
    svg = asyncio.run(capture(Path(root), pane, size, theme))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg, encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=DOCS.parent / "build" / "demo",
                        help="the demo project folder (built there when missing)")
    parser.add_argument("--quick", action="store_true",
                        help="build the small test recipe instead of the full demo")
    parser.add_argument("--pane", choices=sorted(READY), default="uncertainty")
    parser.add_argument("--out", type=Path, default=DOCS / "workbench.svg")
    args = parser.parse_args(argv)
    root = args.demo.expanduser().resolve()
    ensure_demo(root, args.quick)
    print(f"wrote {save_screenshot(root, args.out, args.pane)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
