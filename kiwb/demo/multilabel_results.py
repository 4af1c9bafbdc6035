"""The multi-label demo's results table: micro and macro F1 of each teacher alone, the owners'
mean and each student on the labeled eval texts, and how often shared labels are decided right.
The headless run is the text demo's (kiwb.demo.headless.run_headless) with this demo's students."""

from __future__ import annotations

from rich.table import Table

from kiwb.console import FittedTable
from kiwb.demo.marks import CHECK_CAPTION, check_cell
from kiwb.demo.multilabel_recipe import TEACHERS


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """Micro F1 on the labeled eval texts at 0.5: each teacher alone, the owners' mean, each
    student; a student's figure at the thresholds it tuned on these texts beside."""
    union = sorted({label for labels in TEACHERS.values() for label in labels})
    table = FittedTable(
        title=f"kiwb multi-label demo · micro F1 on {results['eval_texts']} labeled eval texts",
        caption="Every figure decides at 0.5 but the last column: a student tunes a threshold "
        "per label on these very texts, which flatters it there. A teacher alone says no to "
        "the labels it does not know. Shared labels decided right: how often the owners' "
        "integrated answer on a shared label matches the gold one (MC dropout and plain "
        "confidence pick the most confident owner). " + CHECK_CAPTION)
    table.add_column("method", no_wrap=False)
    table.add_column("micro F1", justify="right")
    table.add_column("macro F1", justify="right")
    table.add_column("micro F1 tuned here", justify="right")
    table.add_column("check")
    for name, f1 in results["teachers"].items():
        known = len(TEACHERS.get(name, ()))
        table.add_row(f"teacher {name} alone ({known} of {len(union)} labels)", _percent(f1), "",
                      "", "")
    table.add_row("owners' mean (no training)", _percent(results["ensemble"]), "", "", "")
    table.add_section()
    for name, report in results["students"].items():
        half = report.get("at_half") or {}
        table.add_row(f"student · {name}", _percent(half.get("micro_f1")),
                      _percent(half.get("macro_f1")), _percent(report["accuracy"]),
                      check_cell(report))
    table.add_section()
    routing = results["routing"] or {}
    if routing.get("routing"):
        table.add_row(f"shared labels decided right · {routing['routing']} (the students')",
                      _percent(routing["chosen"]), "", "", "")
    table.add_row("shared labels decided right · MC dropout", _percent(routing.get("mc_dropout")),
                  "", "", "")
    table.add_row("shared labels decided right · plain confidence",
                  _percent(routing.get("plain_confidence")), "", "", "")
    return table
