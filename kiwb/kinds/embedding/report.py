"""`kiwb integrate`'s tables for an embedding project (torch-free): each teacher's width, what
it covers and where it is steadiest; the probes of the teachers and their combinations on the
eval set; the conflicting pairs."""

from __future__ import annotations

from rich.table import Table


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def integration_tables(integration, probe_names: dict[str, str],
                       shared_facts: list[tuple[str, str]]) -> list[Table]:
    """The tables of a recorded integration; `probe_names`: each probe's name in words;
    `shared_facts`: the facts table's rows every kind's report carries (kiwb.report)."""
    summary, details = integration.summary, integration.summary.details or {}
    head = Table(title=f"Integration · {details.get('weighting')} pair weighting",
                 title_justify="left")
    for column in ("teacher", "width", "covers", "steadiest on", "median dispersion"):
        head.add_column(column, justify="left" if column == "teacher" else "right")
    total = max(summary.num_texts, 1)
    for facts in summary.per_teacher:
        own = facts.own or {}
        head.add_row(facts.name, str(own.get("width", "–")), _percent(own.get("coverage")),
                     f"{facts.wins:,} ({_percent(facts.wins / total)})",
                     f"{own.get('dispersion_median', 0.0):.2e}")
    tables = [head]
    rows = (details.get("eval") or {}).get("rows") or {}
    if rows:
        names = list(next(iter(rows.values())))
        probes = Table(title=f"Probes on the eval set ({details['eval']['texts']:,} texts), "
                             "before any student", title_justify="left")
        probes.add_column("")
        for name in names:
            probes.add_column(probe_names.get(name, name), justify="right")
        for row, figures in rows.items():
            probes.add_row(row, *(_percent(figures.get(name)) for name in names))
        tables.append(probes)
    facts = Table("fact", show_header=False, title="Summary", title_justify="left")
    facts.add_column("value", justify="right")
    facts.add_row("texts", f"{summary.num_texts:,}")
    facts.add_row("conflicting pairs listed", f"{summary.conflicts:,}")
    median = summary.margin_quantiles.get("0.5")
    if median is not None:
        facts.add_row("their median cosine spread", f"{1 - median:.3f}")
    for row in shared_facts:  # the teachers' dropout: steadiness not from its own dropout
        facts.add_row(*row)
    judged = details.get("judgements")
    if judged is not None:
        facts.add_row("judged pairs used · (teacher, text) places taken",
                      f"{judged['pairs']:,} · {judged['places_taken']:,}")
    return [*tables, facts]
