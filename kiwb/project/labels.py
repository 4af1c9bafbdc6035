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


def give_labels(db: sqlite3.Connection, decisions: Iterable[tuple],
                keep: str | None = None) -> list[GivenLabel | None]:
    """Record many decisions, (text, label) pairs or Decisions, in one transaction (all or
    nothing); returns what each replaced. `keep`: first keep the labels as they are in the
    history, saying why (a bulk change: an import, the workbench's first label of a session)."""
    user, host = _who()
    now = time.time()
    replaced = []
    db.execute("BEGIN IMMEDIATE")
    try:
        if keep is not None:
            keep_current(db, keep)
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


def replace_all(db: sqlite3.Connection, decisions: Iterable[tuple],
                reason: str = "replaced") -> int:
    """Forget every label, then record `decisions` ((text, label) pairs or Decisions), in one
    transaction, the labels before kept in the history (`reason`: what replaced them);
    returns how many texts they label."""
    user, host = _who()
    now = time.time()
    rows = {row[0]: row for row in (_row(decision, now, user, host) for decision in decisions)}
    if not rows:  # forgetting every label is never what a replacement means
        raise ValueError("replacing the labels with none would forget every label given; "
                         "nothing changed")
    db.execute("BEGIN IMMEDIATE")
    try:
        keep_current(db, reason)
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


# -- the history: every set of labels a bulk change replaced ---------------------------------

@dataclass(frozen=True)
class LabelSet:
    """A set of labels kept before a change replaced it."""

    id: int
    taken_at: float
    reason: str
    user: str
    host: str
    labels: int


def keep_current(db: sqlite3.Connection, reason: str) -> int | None:
    """Copy the labels as they are into the history (inside the caller's transaction), saying
    what is about to change them; None when there are none to keep."""
    count = label_count(db)
    if not count:
        return None
    user, host = _who()
    cursor = db.execute("INSERT INTO label_sets (taken_at, reason, user, host, labels) "
                        "VALUES (?, ?, ?, ?, ?)", (time.time(), reason, user, host, count))
    db.execute("INSERT INTO label_set_rows SELECT ?, text_hash, text, label, given_at, user, "
               "host FROM text_labels", (cursor.lastrowid,))
    return cursor.lastrowid


def label_history(db: sqlite3.Connection) -> list[LabelSet]:
    """Every set of labels kept, oldest first."""
    rows = db.execute("SELECT id, taken_at, reason, user, host, labels FROM label_sets "
                      "ORDER BY id")
    return [LabelSet(*row) for row in rows]


def restore_set(db: sqlite3.Connection, set_id: int) -> int:
    """Put back the labels of history set `set_id` (the labels as they are kept first, so
    restoring can be undone the same way); returns how many."""
    rows = db.execute("SELECT text_hash, text, label, given_at, user, host FROM label_set_rows "
                      "WHERE set_id = ?", (set_id,)).fetchall()
    if not db.execute("SELECT 1 FROM label_sets WHERE id = ?", (set_id,)).fetchone():
        raise ValueError(f"no set {set_id} in the label history")
    db.execute("BEGIN IMMEDIATE")
    try:
        keep_current(db, f"kiwb labels restore {set_id}")
        db.execute("DELETE FROM text_labels")
        db.executemany("INSERT INTO text_labels VALUES (?, ?, ?, ?, ?, ?)",
                       [tuple(row) for row in rows])
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return len(rows)
