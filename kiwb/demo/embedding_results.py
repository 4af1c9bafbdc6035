"""The embedding demo's results table: each encoder alone, their concatenation and average
(no training), then each student, by kNN accuracy of the eval texts' topics. The headless run
is the text demo's (kiwb.demo.headless.run_headless) with this demo's students."""

from __future__ import annotations

from rich.table import Table

from kiwb.console import FittedTable
from kiwb.demo.embedding_recipe import TEACHERS


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """kNN accuracy (k = 10, leave one out) of the eval texts' topics in each space."""
    topics = sum(len(known) for known in TEACHERS.values())
    table = FittedTable(
        title=f"kiwb embedding demo · kNN accuracy on {results['eval_texts']} eval texts",
        caption="Each encoder was tuned on half the topics: it places those apart, the others "
        "less well. The topics only measure the spaces; no student sees them.")
    table.add_column("embedding space", no_wrap=False)
    table.add_column("kNN accuracy", justify="right")
    for name, figures in (results.get("probes") or {}).items():
        label = (f"teacher {name} alone ({len(TEACHERS[name])} of {topics} topics)"
                 if name in TEACHERS else f"{name} of the teachers (no training)")
        table.add_row(label, _percent(figures.get("knn_accuracy")))
    table.add_section()
    for name, report in results["students"].items():
        table.add_row(f"student · {name}", _percent(report["accuracy"]))
    return table
