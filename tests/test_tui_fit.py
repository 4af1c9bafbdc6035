"""Every pane and dialog is readable at 80×24 and at 140 columns: no word cut short ("…")
and every key the footer offers shown whole. The screen is read as the terminal shows it
(the compositor's lines), so a cell, a heading or a dialog line cut anywhere is caught."""

from __future__ import annotations

import pytest
from textual.widgets import Footer
from tui_support import FUNNEL, TEXTS, run_async, synthetic_project, workbench, write_run

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store

SIZES = [(80, 24), (140, 40)]
# What to press, from the Teachers pane, to see each pane and dialog.
VIEWS = {
    "teachers": [], "data": ["2"], "jobs": ["3"], "uncertainty": ["4"], "accuracy": ["5"],
    "conflicts": ["6"], "export": ["7"], "help": ["question_mark"], "add teacher": ["a"],
    "score form": ["3", "s"], "integrate form": ["3", "i"], "train form": ["3", "t"],
    "merge form": ["3", "m"], "where classes go": ["5", "w"], "conflict detail": ["6", "enter"],
}
# Shown on purpose: the help's "1 … 7" is a range of keys, not a cut.
MEANT = ("1 … 7",)


def screen_lines(app) -> list[str]:
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def cut_lines(lines: list[str]) -> list[str]:
    """Lines with a word cut short, but for the Conflicts list's text column, which shows the
    start of each text (Enter shows it whole) and so must end in "…" where the text is long."""
    found = []
    for line in lines:
        shown = line
        for meant in MEANT:
            shown = shown.replace(meant, "")
        if "…" not in shown:
            continue
        start = shown.split("…")[0].split("  ")[-1].strip()
        if start and any(text.startswith(start) and len(text) > len(start) for text in TEXTS):
            continue  # a conflict's text, started
        found.append(line)
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = synthetic_project(tmp_path_factory.mktemp("fit") / "proj", trained=False)
    with Store(ProjectPaths(root).store) as store:
        write_run(root, store, funnel=FUNNEL)  # so that w shows the class funnel's tables
    return root


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@run_async
async def test_every_pane_and_dialog_fits_without_cut_words(project, size):
    problems = {}
    for view, keys in VIEWS.items():
        app = workbench(project)
        async with app.run_test(size=size) as pilot:
            for key in keys:
                await pilot.pause(0.3)  # the pane's data first: a key may act on its rows
                await pilot.press(key)
            await pilot.pause(0.6)
            lines = screen_lines(app)
            if cut := cut_lines(lines):
                problems[view] = cut
            footer = app.screen.query(Footer)
            if footer:  # every key the footer offers, with its words whole, on the last line
                offered = [binding.description for (_, binding, enabled, _)
                           in app.screen.active_bindings.values() if binding.show and enabled]
                missing = [words for words in offered if words not in lines[-1]]
                if missing:
                    problems[f"{view} footer"] = [lines[-1], f"missing: {missing}"]
    assert problems == {}
