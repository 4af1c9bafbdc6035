"""Gold labels a user gives to texts, in the workbench or with `kiwb labels import`.

A label is keyed by the text's content hash, not by a row: it survives rescoring, a new
integration and a reordered data file, and finds its text in any data set that holds it.
"None of these labels" (the text is in no teacher's scope) is a decision too: such a text is
left out of training. Every decision is committed as it is made, so killing the workbench or a
worker never loses one. Plain sqlite3 over the store's connection, so the store can build on it.
"""

from __future__ import annotations

import getpass
import hashlib
import socket
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

NONE = "none"  # how "none of these labels" is written in files and on the command line


def text_hash(text: str) -> str:
    """Hash of one text's content, to recognise the same text in two data sets."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GivenLabel:
    """One decision on one text: a label name, or None for "none of these labels"."""

    text_hash: str
    text: str
    label: str | None
    given_at: float
    user: str
    host: str

    @property
    def shown(self) -> str:
        """The label as files and screens write it (`none` for none of these labels)."""
        return NONE if self.label is None else self.label


class Decision(NamedTuple):
    """A decision to record: a text and its label (None: none of these labels), and where it
    comes from a label file, when and by whom it was given (None: now, by this user)."""

    text: str
    label: str | None
    given_at: float | None = None
    user: str | None = None
    host: str | None = None


def _row(decision: tuple, now: float, user: str, host: str) -> tuple:
    """The text_labels row of a (text, label) pair or a Decision."""
    item = Decision(*decision)
    return (text_hash(item.text), item.text, item.label,
            now if item.given_at is None else item.given_at, item.user or user, item.host or host)


def _who() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's unnamed uid)
        user = "unknown"
    return user, socket.gethostname()


def give_label(db: sqlite3.Connection, text: str, label: str | None) -> GivenLabel | None:
    """Record `label` (None: none of these labels) for `text`; returns what it replaced."""
    return give_labels(db, [(text, label)])[0]


def give_labels(db: sqlite3.Connection, decisions: Iterable[tuple]) -> list[GivenLabel | None]:
    """Record many decisions, (text, label) pairs or Decisions, in one transaction (all or
    nothing); returns what each replaced."""
    user, host = _who()
    now = time.time()
    replaced = []
    db.execute("BEGIN IMMEDIATE")
    try:
        for decision in decisions:
            row = _row(decision, now, user, host)
            replaced.append(_label_of(db, row[0]))
            db.execute("INSERT OR REPLACE INTO text_labels VALUES (?, ?, ?, ?, ?, ?)", row)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return replaced


def restore(db: sqlite3.Connection, key: str, previous: GivenLabel | None) -> None:
    """Undo a decision on the text of hash `key`: put back `previous` (None: no label)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM text_labels WHERE text_hash = ?", (key,))
        if previous is not None:
            db.execute("INSERT INTO text_labels VALUES (?, ?, ?, ?, ?, ?)",
                       (previous.text_hash, previous.text, previous.label, previous.given_at,
                        previous.user, previous.host))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def replace_all(db: sqlite3.Connection, decisions: Iterable[tuple]) -> int:
    """Forget every label, then record `decisions` ((text, label) pairs or Decisions), in one
    transaction; returns how many texts they label."""
    user, host = _who()
    now = time.time()
    rows = {row[0]: row for row in (_row(decision, now, user, host) for decision in decisions)}
    if not rows:  # forgetting every label is never what a replacement means
        raise ValueError("replacing the labels with none would forget every label given; "
                         "nothing changed")
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM text_labels")
        db.executemany("INSERT INTO text_labels VALUES (?, ?, ?, ?, ?, ?)", rows.values())
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return len(rows)


def all_labels(db: sqlite3.Connection) -> list[GivenLabel]:
    """Every decision, oldest first."""
    rows = db.execute("SELECT text_hash, text, label, given_at, user, host FROM text_labels "
                      "ORDER BY given_at, text_hash")
    return [GivenLabel(*row) for row in rows]


def labels_by_hash(db: sqlite3.Connection) -> dict[str, str | None]:
    """Text hash -> label (None: none of these labels)."""
    return dict(db.execute("SELECT text_hash, label FROM text_labels").fetchall())


def label_count(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT COUNT(*) FROM text_labels").fetchone()[0])


def labels_fingerprint(by_hash: dict[str, str | None]) -> str:
    """One hash of a set of decisions: any label given, changed or taken back changes it."""
    digest = hashlib.sha256()
    for key in sorted(by_hash):
        label = by_hash[key]
        digest.update(f"{key}\t{'' if label is None else 'L' + label}\n".encode())
    return digest.hexdigest()


def _label_of(db: sqlite3.Connection, key: str) -> GivenLabel | None:
    row = db.execute("SELECT text_hash, text, label, given_at, user, host FROM text_labels "
                     "WHERE text_hash = ?", (key,)).fetchone()
    return GivenLabel(*row) if row is not None else None
