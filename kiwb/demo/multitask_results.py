"""The multi-task demo's results table: per task, each teacher alone and the untrained
Ensemble, then each student's figures on the labeled eval texts. The headless run is the text
demo's (kiwb.demo.headless.run_headless) with this demo's students."""

from __future__ import annotations

from rich.table import Table

from kiwb.console import FittedTable
from kiwb.demo.marks import CHECK_CAPTION, check_cell
from kiwb.demo.multitask_recipe import TASKS


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """Each task's headline (topic: accuracy; tags: micro F1 at 0.5), and the tags' micro F1
    at the thresholds the student tuned on these texts (macro F1: demo-results.json)."""
    table = FittedTable(
        title=f"kiwb multi-task demo · on {results['eval_texts']} labeled eval texts",
        caption="topic: accuracy (a teacher alone is right only on its own topics); tags: micro "
        "F1 at 0.5, and at the thresholds a student tunes per label on these very texts (which "
        "flatters it there). One student answers both tasks in one forward pass. "
        "Each head is held to its task's reference (a task one teacher answers: that teacher "
        "alone). " + CHECK_CAPTION)
    table.add_column("method", no_wrap=False)
    for task in TASKS:
        table.add_column(f"{task} {'accuracy' if TASKS[task] == 'single-label' else 'micro F1'}",
                         justify="right")
    tuned = [task for task, kind in TASKS.items() if kind == "multi-label"]
    for task in tuned:
        table.add_column(f"{task} F1 tuned here", justify="right")
    table.add_column("check")
    references = results.get("tasks") or {}
    for task, figures in references.items():
        column = list(TASKS).index(task)
        for teacher, value in (figures.get("teachers") or {}).items():
            cells = [""] * (len(TASKS) + len(tuned) + 1)
            cells[column] = _percent(value)
            table.add_row(f"teacher {teacher} alone", *cells)
    cells = []
    for task in TASKS:
        cells.append(_percent((references.get(task) or {}).get("ensemble")))
    table.add_row("Ensemble per task (no training)", *cells, *[""] * (len(tuned) + 1))
    table.add_section()
    for name, report in results["students"].items():
        cells, tuned_cells = [], []
        for task in TASKS:
            figures = (report.get("tasks") or {}).get(task) or {}
            cells.append(_percent((figures.get("at_half") or {}).get("micro_f1",
                                                                     figures.get("headline"))))
            if task in tuned:
                tuned_cells.append(_percent(figures.get("headline")))
        table.add_row(f"student · {name}", *cells, *tuned_cells, check_cell(report))
    return table
