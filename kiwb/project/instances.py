"""Per-text integration results in the store, for paging conflicting texts.

One row per (integration, text), in the `instances` table that a store migration creates, with
the text's content hash so each row finds the label a user gave the text (`text_labels`,
kiwb.project.labels). Readers page with keyset queries, so a million scored texts never have
to be loaded at once. Three orders:

- `margin`: lowest margin first, every text.
- `useful`: the unlabeled texts a label helps most next. Texts are grouped by (winning
  teacher, class); a group's k-th lowest-margin text takes turn k plus the number of labels
  the group already has, and turns come first, margin second. So the lowest margins lead,
  and labels spread over teachers and classes instead of piling into one. Labeling the first
  text leaves the turns of the others as they were: the order a user works down is stable.
- `sample`: the unlabeled texts in the order of their content hash, which no score steers: the
  first n are a random sample of the pool. Labels from the conflicts list are not a sample,
  and past a few dozen of them a routing fitted on a sample learns more (BENCHMARKS.md,
  "Labeling conflicts on debian-8").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from kiwb.project.labels import text_hash

ORDERS = ("margin", "useful", "sample")
# The keyset of the orders read straight off an index (`useful` is read group by group).
_KEYSET = {"margin": ("margin", "row"), "sample": ("text_hash", "row")}
LABEL_SCOPES = ("all", "labeled", "unlabeled")


@dataclass(frozen=True)
class Instance:
    """One text's integration result, and the label given to it, if any."""

    row: int
    margin: float
    routed: int
    target: int
    gold: int | None
    confidences: list[float]
    text: str
    text_hash: str = ""
    labeled: bool = False       # a decision was made on this text
    given: str | None = None    # its label; None with `labeled`: none of these labels
    turn: int | None = None     # its place in the `useful` order
    # A token integration's cluster: its kind, and each teacher's tags over the span and
    # confidences there (kiwb.kinds.token.summary.save_clusters writes them).
    details: dict | None = None


def replace_instances(db: sqlite3.Connection, integration: str, rows: Iterable[tuple]) -> None:
    """Replace an integration's rows: (row, margin, routed, target, gold, confidences, text)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM instances WHERE integration = ?", (integration,))
        db.executemany(
            "INSERT INTO instances (integration, row, margin, routed, target, gold, confidences, "
            "text, text_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((integration, r, m, t, g, gold, json.dumps(c), text, text_hash(text))
             for r, m, t, g, gold, c, text in rows),
        )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass(frozen=True)
class InstanceFilter:
    """What the conflicts list shows: a margin ceiling, a routed teacher, a class, a search,
    labeled or unlabeled texts, and the order."""

    max_margin: float | None = None
    routed: int | None = None
    target: int | None = None
    search: str | None = None
    labels: str = "all"       # one of LABEL_SCOPES
    order: str = "margin"     # one of ORDERS; `useful` and `sample` list unlabeled texts only

    def where(self) -> tuple[str, list]:
        clauses, params = [], []
        if self.max_margin is not None:
            clauses.append("i.margin < ?")
            params.append(self.max_margin)
        if self.routed is not None:
            clauses.append("i.routed = ?")
            params.append(self.routed)
        if self.target is not None:
            clauses.append("i.target = ?")
            params.append(self.target)
        if self.search:
            clauses.append("i.text LIKE ? ESCAPE '\\'")
            escaped = self.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params.append(f"%{escaped}%")
        if self.order != "margin" or self.labels == "unlabeled":  # they list unlabeled texts
            clauses.append("l.text_hash IS NULL")
        elif self.labels == "labeled":
            clauses.append("l.text_hash IS NOT NULL")
        return "".join(f" AND {c}" for c in clauses), params


_COLUMNS = ("i.row, i.margin, i.routed, i.target, i.gold, i.confidences, i.text, i.text_hash, "
            "l.text_hash IS NOT NULL, l.label")
_FROM = "FROM instances i LEFT JOIN text_labels l ON l.text_hash = i.text_hash"
# Labels already given per (winning teacher, class) group: the `useful` order's head start.
# CROSS JOIN makes SQLite read the (few) labels first and find each text by the text index,
# rather than read every text of the integration.
_GIVEN_PER_GROUP = ("SELECT i.routed, i.target, COUNT(*) FROM text_labels l CROSS JOIN "
                    "instances i ON i.integration = ? AND i.text_hash = l.text_hash GROUP BY 1, 2")


def page(db: sqlite3.Connection, integration: str, filters: InstanceFilter = InstanceFilter(),
         *, after: tuple | None = None, limit: int = 100) -> list[Instance]:
    """Up to `limit` instances in the filter's order, starting after the key `after`:
    (margin, row), (turn, margin, row) in the `useful` order, (text hash, row) in the `sample`
    order (`key_of` gives it)."""
    if filters.order == "useful":
        return _useful_page(db, integration, filters, after, limit)
    where, params = filters.where()
    columns = ", ".join(f"i.{name}" for name in _KEYSET[filters.order])
    if after is not None:
        where += f" AND ({columns}) > (?, ?)"
        params += list(after)
    query = (f"SELECT {_COLUMNS}, NULL {_FROM} WHERE i.integration = ?{where} "
             f"ORDER BY {columns} LIMIT ?")
    return [_instance(r) for r in db.execute(query, [integration, *params, limit])]


def _useful_page(db: sqlite3.Connection, integration: str, filters: InstanceFilter,
                 after: tuple | None, limit: int) -> list[Instance]:
    """The `useful` order, group by group: within a group the keys rise with margin, so a page
    after turn t needs from each group only the `limit` texts from turn t on, which the group
    index reads in order: a page costs about groups x limit rows (plus the depth skipped),
    however many texts there are."""
    where, params = filters.where()
    given = {(routed, target): count for routed, target, count
             in db.execute(_GIVEN_PER_GROUP, (integration,))}
    groups = db.execute("SELECT DISTINCT routed, target FROM instances WHERE integration = ?",
                        (integration,)).fetchall()
    first_turn = after[0] if after is not None else 0
    found = []
    for routed, target in groups:
        head_start = given.get((routed, target), 0)
        skipped = max(0, first_turn - head_start)  # the group's texts of earlier turns
        query = (f"SELECT {_COLUMNS}, NULL {_FROM} WHERE i.integration = ? AND i.routed = ? "
                 f"AND i.target = ?{where} ORDER BY i.margin, i.row LIMIT ? OFFSET ?")
        rows = db.execute(query, [integration, routed, target, *params, limit + 1, skipped])
        found += [replace(_instance(row), turn=head_start + skipped + number)
                  for number, row in enumerate(rows)]
    found = [item for item in found if after is None or key_of(item, filters) > tuple(after)]
    return sorted(found, key=lambda item: key_of(item, filters))[:limit]


def key_of(item: Instance, filters: InstanceFilter) -> tuple:
    """The keyset position of `item` in the filter's order: the `after` of the next page."""
    if filters.order == "useful":
        return (item.turn, item.margin, item.row)
    return tuple(getattr(item, name) for name in _KEYSET[filters.order])


def count(db: sqlite3.Connection, integration: str, filters: InstanceFilter = InstanceFilter()) -> int:
    where, params = filters.where()
    query = f"SELECT COUNT(*) {_FROM} WHERE i.integration = ?{where}"
    return int(db.execute(query, [integration, *params]).fetchone()[0])


def labeled_in(db: sqlite3.Connection, integration: str) -> list[tuple[str, int, str | None]]:
    """(text hash, routed teacher, label or None for none of these labels) of every text of
    an integration that has a label."""
    query = ("SELECT i.text_hash, i.routed, l.label FROM text_labels l CROSS JOIN instances i "
             "ON i.integration = ? AND i.text_hash = l.text_hash ORDER BY i.row")
    return [tuple(row) for row in db.execute(query, (integration,))]


def _instance(row: Sequence) -> Instance:
    stored = json.loads(row[5])
    # A text's row stores the routing scores as a list; a cluster's, a dict with them inside.
    details = stored if isinstance(stored, dict) else None
    confidences = details["scores"] if details is not None else stored
    return Instance(row[0], row[1], row[2], row[3], row[4], confidences, row[6], row[7],
                    bool(row[8]), row[9], row[10], details)
