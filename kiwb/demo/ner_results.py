"""The NER demo's results table: entity F1 of each teacher alone, the Ensemble and each student
on the tagged eval sentences, and routing per gold entity. The headless run that produces the
figures is the text demo's (kiwb.demo.headless.run_headless): the same recorded jobs, which
read the project's kind from its teachers."""

from __future__ import annotations

from rich.table import Table

from kiwb.console import FittedTable
from kiwb.demo.marks import CHECK_CAPTION, check_cell
from kiwb.demo.ner_recipe import TEACHERS


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """Entity F1 on the tagged eval sentences: each teacher alone, the Ensemble, each student."""
    table = FittedTable(
        title=f"kiwb NER demo · entity F1 on {results['eval_texts']} tagged eval sentences",
        caption="A teacher alone finds only its own entity types. Teacher routing: how often "
        "the teacher a routing picks for a gold entity's words knows its type (the students "
        "use the project's routing; MC dropout and plain confidence compare raw confidences). "
        + CHECK_CAPTION)
    table.add_column("method", no_wrap=False)  # the names wrap; the figures keep their width
    table.add_column("entity F1", justify="right")
    table.add_column("macro-F1", justify="right")
    table.add_column("check")
    for name, f1 in results["teachers"].items():
        types = ", ".join(TEACHERS.get(name, ()))
        table.add_row(f"teacher {name} alone ({types})", _percent(f1), "", "")
    table.add_row("Ensemble (no training)", _percent(results["ensemble"]), "", "")
    table.add_section()
    for name, report in results["students"].items():
        table.add_row(f"student · {name}", _percent(report["accuracy"]),
                      _percent(report["macro_f1"]), check_cell(report))
    table.add_section()
    routing = results["routing"]
    if routing.get("routing"):
        table.add_row(f"teacher routing · {routing['routing']} (the students')",
                      _percent(routing["chosen"]), "", "")
    table.add_row("teacher routing · MC dropout", _percent(routing["mc_dropout"]), "", "")
    table.add_row("teacher routing · plain confidence", _percent(routing["plain_confidence"]), "", "")
    return table
