"""How fast the workbench's Conflicts pane opens on a store with many scored texts.

    python benchmarks/conflicts_pane.py                # 1,000,000 texts
    python benchmarks/conflicts_pane.py --texts 100000

Writes a throw-away project (kiwb.toml + a store with N integration rows, as `kiwb integrate`
leaves them), then measures the store queries the pane makes and the pane itself, headless:
from the screen being up to the first page of texts shown, the next page when the cursor
nears the end, and a text search; then the same with 1,000 texts labeled: the "most useful
next" order and the labels' header line. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from kiwb.project.config import write_new_project
from kiwb.project.instances import InstanceFilter, count, key_of, page, replace_instances
from kiwb.project.labels import give_labels
from kiwb.project.paths import ProjectPaths
from kiwb.project.queries import label_progress, latest_integration
from kiwb.project.records import IntegrationSettings, IntegrationSummary, teacher_facts
from kiwb.project.store import Store

KEY = "benchmark"
WORDS = "goal vote album oven team senate song chef match party league recipe".split()


def build(root: Path, texts: int, seed: int = 0) -> None:
    write_new_project(root, name="conflicts-benchmark")
    rng = random.Random(seed)

    def rows():
        for row in range(texts):
            first = rng.random()
            margin = rng.random() * first
            yield (row, margin, row % 2, row % 4, row % 4, [first, first - margin],
                   " ".join(rng.choices(WORDS, k=12)) + f" #{row}")

    with Store(ProjectPaths(root).store) as store:
        replace_instances(store.connection, KEY, rows())
        labels = ["sports", "politics", "music", "cooking"]
        summary = IntegrationSummary(
            num_texts=texts, labels=labels, overlapping_labels=[], teachers_kind="sequence",
            per_teacher=teacher_facts(["a", "b"], ["score-a", "score-b"],
                                      [texts // 2, texts - texts // 2],
                                      labels=[labels[:2], labels[2:]]),
            margin_quantiles={}, margin_histogram=[0] * 20, conflict_threshold=0.1, conflicts=0)
        store.record_integration(KEY, dataset="unlabeled", settings=IntegrationSettings().to_dict(),
                                 summary=summary.to_dict())


def timed(function, repeats: int = 5) -> float:
    """Median seconds of `function()` over `repeats` runs."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def query_figures(root: Path) -> dict[str, float]:
    with Store(ProjectPaths(root).store) as store:
        db = store.connection
        conflicts = InstanceFilter(max_margin=0.1)
        first = page(db, KEY, conflicts, limit=201)
        last = (first[-1].margin, first[-1].row)
        return {
            "first page (200, margin < 0.1)": timed(lambda: page(db, KEY, conflicts, limit=201)),
            "next page (keyset)": timed(lambda: page(db, KEY, conflicts, after=last, limit=201)),
            "first page, teacher + class filter": timed(
                lambda: page(db, KEY, InstanceFilter(0.1, routed=1, target=3), limit=201)),
            "count (margin < 0.1)": timed(lambda: count(db, KEY, conflicts)),
            "count (all texts)": timed(lambda: count(db, KEY, InstanceFilter())),
            "search page ('#777', all margins)": timed(
                lambda: page(db, KEY, InstanceFilter(search="#777"), limit=201), repeats=3),
        }


def label_figures(root: Path, labeled: int = 1000) -> dict[str, float]:
    """The labeling queries, with `labeled` of the lowest-margin texts labeled."""
    with Store(ProjectPaths(root).store) as store:
        db = store.connection
        lowest = page(db, KEY, InstanceFilter(max_margin=0.1), limit=labeled)
        give_labels(db, [(item.text, "sports") for item in lowest])
        useful = InstanceFilter(max_margin=0.1, order="useful")
        every = InstanceFilter(order="useful")
        first = page(db, KEY, useful, limit=201)
        integration = latest_integration(store)
        return {
            f"useful first page (margin < 0.1, {labeled:,} labeled)": timed(
                lambda: page(db, KEY, useful, limit=201), repeats=3),
            "useful next page (keyset)": timed(
                lambda: page(db, KEY, useful, after=key_of(first[-1], useful), limit=201),
                repeats=3),
            "useful first page (all margins)": timed(lambda: page(db, KEY, every, limit=201),
                                                     repeats=3),
            "labeled only (all margins)": timed(
                lambda: page(db, KEY, InstanceFilter(labels="labeled"), limit=201), repeats=3),
            "labels header (count, agreement)": timed(
                lambda: label_progress(store, integration), repeats=3),
        }


async def pane_figures(root: Path) -> dict[str, float]:
    from textual.widgets import DataTable

    from kiwb.tui.app import WorkbenchApp
    from kiwb.tui.panes.conflicts import PAGE
    from kiwb.tui.themes import package_themes_folder

    app = WorkbenchApp(root, theme="kiwb-dark", pane="conflicts",
                       theme_folders=[package_themes_folder()])
    figures = {}
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one("#conflicts-table", DataTable)
        started = time.perf_counter()
        while table.row_count == 0:
            await pilot.pause(0.01)
        figures["pane open: screen up -> first page shown"] = time.perf_counter() - started
        table.focus()
        table.move_cursor(row=PAGE - 1)
        started = time.perf_counter()
        while table.row_count < 2 * PAGE:
            await pilot.pause(0.01)
        figures["pane: next page shown"] = time.perf_counter() - started
        await pilot.press("7")
        started = time.perf_counter()
        await pilot.press("6")
        figures["pane: switch back to Conflicts (key 6)"] = time.perf_counter() - started
    return figures


def main() -> None:
    # Time the pane, not the tab underline's 0.3 s slide that Textual's pilot waits out.
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "project"
        started = time.perf_counter()
        build(root, args.texts)
        print(f"built a store of {args.texts:,} texts in {time.perf_counter() - started:.1f}s")
        figures = {**query_figures(root), **asyncio.run(pane_figures(root)), **label_figures(root)}
        for name, seconds in figures.items():
            print(f"{name:45s} {1000 * seconds:9.1f} ms")


if __name__ == "__main__":
    main()
