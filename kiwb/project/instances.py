"""Per-text integration results in the store, for paging conflicting texts (lowest margin first).

One row per (integration, text), in the `instances` table that a store migration creates.
Readers page with keyset queries on the margin index, so a million scored texts never have
to be loaded at once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Instance:
    """One text's integration result."""

    row: int
    margin: float
    routed: int
    target: int
    gold: int | None
    confidences: list[float]
    text: str


def replace_instances(db: sqlite3.Connection, integration: str, rows: Iterable[tuple]) -> None:
    """Replace an integration's rows: (row, margin, routed, target, gold, confidences, text)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM instances WHERE integration = ?", (integration,))
        db.executemany(
            "INSERT INTO instances VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ((integration, r, m, t, g, gold, json.dumps(c), text) for r, m, t, g, gold, c, text in rows),
        )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass(frozen=True)
class InstanceFilter:
    """What the conflicts list shows: a margin ceiling, a routed teacher, a class, a search."""

    max_margin: float | None = None
    routed: int | None = None
    target: int | None = None
    search: str | None = None

    def where(self) -> tuple[str, list]:
        clauses, params = [], []
        if self.max_margin is not None:
            clauses.append("margin < ?")
            params.append(self.max_margin)
        if self.routed is not None:
            clauses.append("routed = ?")
            params.append(self.routed)
        if self.target is not None:
            clauses.append("target = ?")
            params.append(self.target)
        if self.search:
            clauses.append("text LIKE ? ESCAPE '\\'")
            escaped = self.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params.append(f"%{escaped}%")
        return "".join(f" AND {c}" for c in clauses), params


def page(db: sqlite3.Connection, integration: str, filters: InstanceFilter = InstanceFilter(),
         *, after: tuple[float, int] | None = None, limit: int = 100) -> list[Instance]:
    """Up to `limit` instances ordered by (margin, row), starting after the key `after`."""
    where, params = filters.where()
    if after is not None:
        where += " AND (margin, row) > (?, ?)"
        params += list(after)
    query = (f"SELECT row, margin, routed, target, gold, confidences, text FROM instances "
             f"WHERE integration = ?{where} ORDER BY margin, row LIMIT ?")
    return [_instance(r) for r in db.execute(query, [integration, *params, limit])]


def count(db: sqlite3.Connection, integration: str, filters: InstanceFilter = InstanceFilter()) -> int:
    where, params = filters.where()
    query = f"SELECT COUNT(*) FROM instances WHERE integration = ?{where}"
    return int(db.execute(query, [integration, *params]).fetchone()[0])


def _instance(row: Sequence) -> Instance:
    return Instance(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]), row[6])
