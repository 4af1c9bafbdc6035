"""The workbench opens fast on a busy GPU box: it never loads torch, transformers or datasets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = {"torch", "transformers", "datasets"}


def _run(code: str) -> tuple[set[str], list[str]]:
    """The modules loaded after running `code` in a fresh interpreter, and what it printed."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    lines = output.stdout.splitlines()
    return set(json.loads(lines[-1])), lines[:-1]


def _modules_after(code: str) -> set[str]:
    return _run(code)[0]


def test_the_workbench_imports_no_heavy_library():
    loaded = _modules_after(
        "import kiwb.tui, kiwb.tui.app, kiwb.tui.launcher, kiwb.tui.inspect, kiwb.tui.config_edit\n"
        "from kiwb.tui.app import WorkbenchApp\n"
        "import kiwb.tui.panes.conflicts, kiwb.tui.panes.jobs, kiwb.tui.panes.export")
    assert "textual" in loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_the_query_layer_imports_neither_torch_nor_textual():
    loaded = _modules_after("import kiwb.project.queries")
    assert not loaded & (HEAVY | {"textual"})


@pytest.mark.slow
def test_visiting_every_pane_loads_no_heavy_library(tmp_path):
    """Not only the imports: a session that opens each pane (by its number key) and a
    conflict's details."""
    from pathlib import Path

    tests = Path(__file__).parent
    loaded, printed = _run(f"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {str(tests)!r})
from tui_support import synthetic_project, workbench, wait_for
from textual.widgets import DataTable

async def visit():
    app = workbench(synthetic_project(Path({str(tmp_path / "proj")!r})))
    async with app.run_test(size=(100, 30)) as pilot:
        for key in "7654321":
            await pilot.press(key)
            print("pane", key, app.screen.query_one("TabbedContent").active)
        await pilot.press("6")
        table = app.screen.query_one("#conflicts-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0)
        await pilot.press("enter")
        await pilot.pause(0.5)

asyncio.run(visit())""")
    assert [line for line in printed if line.startswith("pane")] == [
        f"pane {key} {pane}" for key, pane in zip("7654321", (
            "export", "conflicts", "accuracy", "uncertainty", "jobs", "data", "teachers"), strict=True)]
    assert "kiwb.tui.screens.detail" in loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)
