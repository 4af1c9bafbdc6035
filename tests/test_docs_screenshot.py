"""docs/make_screenshot.py, the picture of the workbench in the README and the docs, on a small store."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from tui_support import synthetic_project

SCRIPT = Path(__file__).parent.parent / "docs" / "make_screenshot.py"


@pytest.fixture(scope="module")
def make_screenshot():
    spec = importlib.util.spec_from_file_location("make_screenshot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shown_text(svg: str) -> str:
    """The characters of an SVG screenshot, spaces included, in document order."""
    return re.sub(r"<[^>]+>", "", svg).replace("&#160;", " ")


def test_the_screenshot_shows_the_uncertainty_pane_of_a_project(make_screenshot, tmp_path):
    project = synthetic_project(tmp_path / "proj")
    out = make_screenshot.save_screenshot(project, tmp_path / "docs" / "workbench.svg")
    svg = out.read_text(encoding="utf-8")
    assert svg.startswith("<svg") and 'viewBox="0 0 1482 ' in svg   # 120 columns wide
    shown = _shown_text(svg)
    for words in ("4 Uncertainty", "a · MC dropout · 10 texts", "Routing · mixture",
                  "a: won 5 (50%) · est. in its labels 50%", "Right vs wrong teacher"):
        assert words in shown, words


def test_a_demo_folder_is_built_only_once_integrated(make_screenshot, tmp_path):
    assert not make_screenshot.integrated(tmp_path)
    assert not make_screenshot.integrated(synthetic_project(tmp_path / "scored", integrated=False))
    assert make_screenshot.integrated(synthetic_project(tmp_path / "integrated"))
