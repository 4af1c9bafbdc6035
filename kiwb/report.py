"""Rich tables summarising results, for the CLI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from kiwb.console import FittedTable
from kiwb.core.choices import OWN_SCORE_ROUTINGS
from kiwb.kinds import kind_named
from kiwb.project.config_schema import SINGLE_LABEL_TASK
from kiwb.project.dropout_rates import dropout_rows
from kiwb.project.records import (
    POOL_COLUMNS,
    RECALL_COLUMNS,
    ClassFunnel,
    IntegrationRecord,
    RoutingChoice,
    TeacherRouting,
)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def integration_tables(integration: IntegrationRecord | Mapping[str, Any]) -> list[Table]:
    """A recorded integration (typed, or as the store returns it): wins per teacher, margins,
    conflicts, routing accuracy."""
    if not isinstance(integration, IntegrationRecord):
        integration = IntegrationRecord.from_dict(integration)
    summary, settings = integration.summary, integration.settings
    kind = kind_named(summary.teachers_kind)
    # a kind with tables of its own
    own = kind.words.report_tables(integration, dropout_rows(summary.teacher_dropout))
    if own is not None:
        return own
    routing = summary.routing
    routing_name = routing.name if routing is not None else kind.words.routing_unrecorded
    probabilistic = routing is not None and routing.name != "confidence"
    choice = summary.routing_choice
    use_mc = choice.use_mc if choice is not None else settings.use_mc
    head = FittedTable(title=f"Integration · {settings.method} · routing {routing_name}"
                       + (" (chosen by auto)" if choice is not None else "")
                       + (f" (tau {settings.tau})" if settings.method == "muki-soft" and not probabilistic else "")
                       + ("" if use_mc or routing_name in OWN_SCORE_ROUTINGS else " · no MC dropout")
                       + ("" if settings.reweight else " · no re-weighting"))
    head.add_column("teacher")  # kept whole; the figures' long headers wrap
    kind = kind_named(summary.teachers_kind)
    scored = (routing.score if routing is not None else None) or "confidence"
    for figure in (f"{kind.words.units} won", "share", "est. in its labels",
                   f"routed above {scored}"):
        head.add_column(figure, justify="right", no_wrap=False)
    labeled = routing.labeled_texts if routing is not None else 0
    if labeled:
        head.add_column(f"calibration error ({labeled} labels)", justify="right", no_wrap=False)
    # a representation routing: where each teacher's class means (or neighbours) came from
    references = any(t.routing is not None and t.routing.reference for t in summary.per_teacher)
    if references:
        head.add_column("reference", no_wrap=False)
    total = max(summary.num_texts, 1)
    for teacher in summary.per_teacher:
        facts = teacher.routing
        split = facts.split if facts is not None else None
        row = [teacher.name, f"{teacher.wins:,}", _percent(teacher.wins / total),
               _percent(facts.share if facts is not None else None),
               "–" if split is None else f"{split:.3f}"]
        if labeled:
            row.append(_calibration(facts))
        if references:
            row.append((facts.reference if facts is not None else None) or "–")
        head.add_row(*row)

    margins = FittedTable(title="Routing margin (top score − second)")
    for quantile in summary.margin_quantiles:
        margins.add_column(_quantile_name(quantile), justify="right")
    margins.add_row(*(f"{v:.3f}" for v in summary.margin_quantiles.values()))

    # Both wrap, the wider first: long names of facts, a long list of labels.
    facts = FittedTable("fact", show_header=False, title="Summary", wrap=("fact", "value"))
    facts.add_column("value", justify="right")
    facts.add_row(kind.words.units, f"{summary.num_texts:,}")
    if summary.token is not None:  # a token integration's clusters stand in sentences
        facts.add_row("sentences · words", f"{summary.token['texts']:,} · {summary.token['words']:,}")
        kinds = summary.token.get("cluster_kinds") or {}
        facts.add_row("clusters by kind", ", ".join(f"{name} {count:,}" for name, count in
                                                     sorted(kinds.items())) or "none")
    facts.add_row("union labels", ", ".join(summary.labels))
    if summary.overlapping_labels:
        facts.add_row("shared by several teachers", ", ".join(summary.overlapping_labels))
    facts.add_row(f"conflicting (margin < {summary.conflict_threshold})",
                  f"{summary.conflicts:,} ({_percent(summary.conflicts / total)})")
    given = summary.gold_labels
    if given is not None:
        facts.add_row("labeled texts: one-hot targets", f"{given.labeled:,}")
        facts.add_row("marked none of these labels: left out", f"{given.left_out:,}")
        if given.eval_left_out:
            facts.add_row("eval texts with a label: left out of eval", f"{given.eval_left_out:,}")
    evaluation = summary.eval
    per = "" if kind.words.routing_unit == "texts" else f" ({kind.words.routing_unit})"
    routing_used = summary.routed_by or "the routing"
    for scope, accuracy in (("unlabeled", summary.routing_accuracy),
                            ("eval", evaluation.routing_accuracy if evaluation else None)):
        if accuracy is not None:
            if accuracy.chosen is not None:
                picked_here = scope == "eval" and choice is not None and choice.basis == "labels"
                facts.add_row(f"routing accuracy on {scope}{per}: {routing_used} (used"
                              + (", chosen on these texts" if picked_here else "") + ")",
                              _percent(accuracy.chosen))
                if picked_here and choice.cross_validated is not None:
                    facts.add_row(f"routing accuracy on {scope}{per}: {routing_used}, "
                                  "cross-validated choice", _percent(choice.cross_validated))
            facts.add_row(f"routing accuracy on {scope}{per}: MC confidence",
                          _percent(accuracy.mc_dropout))
            facts.add_row(f"routing accuracy on {scope}{per}: plain confidence",
                          _percent(accuracy.plain_confidence))
    for row in dropout_rows(summary.teacher_dropout):  # MC figures not a teacher's own
        facts.add_row(*row)
    if evaluation is not None and evaluation.ensemble_accuracy is not None:
        facts.add_row(f"Ensemble {kind.words.headline} on eval",
                      _percent(evaluation.ensemble_accuracy))
    if summary.token is not None and "eval" in summary.token:
        facts.add_row(f"targets' {kind.words.headline} on eval",
                      _percent(summary.token["eval"]["targets"]["f1"]))
    tables = [head, margins, facts]
    if choice is not None:
        tables.append(choice_table(choice))
    if summary.details and "tasks" in summary.details:
        tables.append(task_table(summary.details["tasks"], summary.conflict_threshold))
    if summary.funnel is not None:
        tables += funnel_tables(summary.funnel)
    return tables


def choice_table(choice: RoutingChoice) -> Table:
    """How `routing = "auto"` chose: on labeled texts, every candidate's routing accuracy there
    (the chosen one marked); without labels, the rule it followed."""
    title = f"Routing chosen by auto: {choice.chosen}"
    if choice.table:
        table = FittedTable(title=title)
        table.add_column("routing")
        table.add_column(f"routed right ({choice.labeled_texts:,} labeled texts)", justify="right",
                         no_wrap=False)
        for name, accuracy in sorted(choice.table.items(), key=lambda item: -item[1]):
            table.add_row(f"[bold]{name} ← chosen[/bold]" if name == choice.chosen else name,
                          _percent(accuracy))
        table.caption = choice.why + (f"; left out: {choice.left_out}" if choice.left_out else "")
        return table
    table = FittedTable(title=title, wrap=("why",))
    table.add_column("why")
    table.add_row(choice.why)
    if choice.left_out:
        table.add_row(f"left out: {choice.left_out}")
    return table


def task_table(tasks: Mapping[str, Any], threshold: float) -> Table:
    """A multi-task integration per task: its kind, teachers, conflicts and, on the eval set,
    its untrained Ensemble (accuracy, or the owners' mean micro F1)."""
    table = FittedTable(title="Tasks", wrap=("teachers",))
    for column in ("task", "kind", "teachers"):
        table.add_column(column)
    table.add_column(f"conflicts (margin < {threshold})", justify="right", no_wrap=False)
    table.add_column("Ensemble on eval", justify="right", no_wrap=False)
    for name, task in tasks.items():
        summary = task.get("summary") or {}
        conflicts = summary.get("conflicts")
        table.add_row(name, task["kind"], ", ".join(task["teachers"]),
                      "– (one teacher)" if conflicts is None else f"{conflicts:,}",
                      _percent((task.get("eval") or {}).get("ensemble")))
    return table


def funnel_tables(funnel: ClassFunnel,
                  student_recall: Mapping[str, float | None] | None = None) -> list[Table]:
    """Where each class goes: the pool's counts and shares, and (with labels) each recall step
    with the step that loses the class; two tables, so each fits 80 columns."""
    rows = funnel.rows(student_recall)
    pool = _columns_table(f"Where each class goes ({funnel.num_texts:,} pool texts)",
                          POOL_COLUMNS, rows)
    if funnel.labeled is None:
        return [pool]
    shown = [column for column in RECALL_COLUMNS if column in rows[0]]
    return [pool, _columns_table(f"Recall of each class, step by step, on {funnel.labeled.where}",
                                 shown, rows)]


def _columns_table(title: str, columns, rows: list[dict[str, str]]) -> Table:
    # Class and owner names stay whole; the figures' headers wrap.
    table = FittedTable(title=title, wrap=[name for name in columns
                                           if name not in ("class", "owner", "lost at")])
    for name in columns:
        table.add_column(name, justify="left" if name in ("class", "owner", "lost at")
                         else "right")
    for row in rows:
        table.add_row(*(row[name] for name in columns))
    return table


def _calibration(facts: TeacherRouting | None) -> str:
    """A teacher's expected calibration error on the labeled texts of its labels: `0.081`."""
    if facts is None or facts.calibration_error is None:
        return "– (no labeled text of its labels)"
    return f"{facts.calibration_error:.3f}"


def _quantile_name(quantile: str) -> str:
    return {"0.0": "min", "0.5": "median", "1.0": "max"}.get(quantile, f"p{round(float(quantile) * 100)}")


def evaluation_table(report: dict) -> Table:
    """Overall and per-class accuracy of one evaluation."""
    table = FittedTable(title=f"{report['run']} · {report['checkpoint']} on {report['data']}")
    kind = kind_named(report.get("kind"))
    name, figure = kind.words.per_class_columns
    table.add_column(name)
    table.add_column(figure, justify="right")
    for label, value in report["per_class_accuracy"].items():
        table.add_row(label, _percent(value))
    table.add_section()
    for task, figures in (report.get("tasks") or {}).items():  # a multi-task student's
        headline = "accuracy" if figures["kind"] == SINGLE_LABEL_TASK else "micro F1"
        table.add_row(f"[bold]{task}[/bold] {headline}", f"[bold]{_percent(figures['headline'])}[/bold]")
        if figures.get("at_half"):
            table.add_row(f"{task} micro F1 at 0.5", _percent(figures["at_half"]["micro_f1"]))
    table.add_row(f"[bold]{kind.words.overall_row}[/bold]",
                  f"[bold]{_percent(report['accuracy'])}[/bold]")
    table.add_row("macro-F1", _percent(report["macro_f1"]))
    if report.get("at_half"):  # a multi-label student's figures without its tuned thresholds
        table.add_row("micro F1 at 0.5", _percent(report["at_half"]["micro_f1"]))
    if entity := report.get("entity"):  # a tagger's span figures
        table.add_row("strict IOB2 F1", _percent(entity["strict"]["f1"]))
        table.add_row("precision · recall", f"{_percent(entity['precision'])} · "
                                            f"{_percent(entity['recall'])}")
        table.add_row("word accuracy", _percent(entity["word_accuracy"]))
    return table
