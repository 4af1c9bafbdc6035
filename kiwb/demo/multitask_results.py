"""The multi-task demo's results table: per task, each teacher alone and the untrained
Ensemble, then each student's figures on the labeled eval texts. The headless run is the text
demo's (kiwb.demo.headless.run_headless) with this demo's students."""

from __future__ import annotations

from rich.table import Table

from kiwb.console import FittedTable
from kiwb.demo.multitask_recipe import TASKS


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """Each task's headline (topic: accuracy; tags: micro F1 at 0.5) and macro F1."""
    table = FittedTable(
        title=f"kiwb multi-task demo · on {results['eval_texts']} labeled eval texts",
        caption="topic: accuracy (a teacher alone is right only on its own topics); tags: micro "
        "F1 at 0.5. One student answers both tasks in one forward pass.")
    table.add_column("method", no_wrap=False)
    for task in TASKS:
        table.add_column(f"{task} {'accuracy' if TASKS[task] == 'single-label' else 'micro F1'}",
                         justify="right")
        table.add_column(f"{task} macro F1", justify="right")
    references = results.get("tasks") or {}
    for task, figures in references.items():
        column = list(TASKS).index(task)
        for teacher, value in (figures.get("teachers") or {}).items():
            cells = ["", "", "", ""]
            cells[2 * column] = _percent(value)
            table.add_row(f"teacher {teacher} alone", *cells)
    cells = []
    for task in TASKS:
        cells += [_percent((references.get(task) or {}).get("ensemble")), ""]
    table.add_row("Ensemble per task (no training)", *cells)
    table.add_section()
    for name, report in results["students"].items():
        cells = []
        for task in TASKS:
            figures = (report.get("tasks") or {}).get(task) or {}
            cells += [_percent(figures.get("headline")), _percent(figures.get("macro_f1"))]
        table.add_row(f"student · {name}", *cells)
    return table
