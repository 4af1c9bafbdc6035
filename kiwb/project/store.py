"""The project store: one SQLite file holding run records, events, jobs and summaries.

`Store` is the one object callers open. It puts together the store's parts, each in its own
module over the shared connection (`database`): jobs, the event log (`events`), score sets
and shard claims (`shards`). Those modules never import this one, so nothing here is
circular.
"""

from __future__ import annotations

import json
import time
from functools import cached_property
from typing import Any

from kiwb.project import events, shards
from kiwb.project.database import Database
from kiwb.project.dropout_rates import score_set_dropout
from kiwb.project.jobs import Jobs


class Store(Database):
    """A connection to a project's SQLite store, with the operations its callers need."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @cached_property
    def jobs(self) -> Jobs:
        """Job records, lifecycle events, heartbeats and run locks."""
        return Jobs(self)

    # -- content-hash cache ------------------------------------------------------------
    def cached_hash(self, path: str, size: int, mtime_ns: int) -> str | None:
        """The recorded sha256 of a file if its size and mtime are unchanged."""
        row = self.connection.execute(
            "SELECT sha256 FROM file_hashes WHERE path=? AND size=? AND mtime_ns=?",
            (path, size, mtime_ns),
        ).fetchone()
        return row["sha256"] if row else None

    def remember_hash(self, path: str, size: int, mtime_ns: int, sha256: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?)",
                (path, size, mtime_ns, sha256),
            )

    # -- score sets and shards (kiwb.project.shards) -------------------------------------
    def register_score_set(
        self, key: str, *, teacher: str, dataset: str, num_texts: int, num_shards: int,
        meta: dict[str, Any],
    ) -> None:
        """Record a score set (idempotent: an existing key is left as it is)."""
        shards.register_score_set(self, key, teacher=teacher, dataset=dataset,
                                  num_texts=num_texts, num_shards=num_shards, meta=meta)

    def add_score_meta(self, key: str, values: dict[str, Any]) -> None:
        """Add to a score set's meta what scoring learnt of it (whether dropout acts)."""
        shards.add_score_meta(self, key, values)

    def score_set(self, key: str) -> dict[str, Any] | None:
        return shards.score_set(self.connection, key)

    def score_drawings(self) -> list[dict[str, Any]]:
        """How the registered score sets were drawn (device, GPU model, precision), newest
        first, each once: readers find sets drawn on GPUs they cannot name by these."""
        return shards.score_drawings(self.connection)

    def done_shards(self, key: str) -> set[int]:
        return shards.done_shards(self.connection, key)

    def claim_shard(self, key: str, shard: int, owner: str) -> bool:
        """Claim a shard for this process unless it is done or held by a live process."""
        return shards.claim_shard(self, key, shard, owner)

    def finish_shard(self, key: str, shard: int, *, rows: int, seconds: float,
                     row_start: int | None = None, size: int | None = None,
                     sha256: str | None = None) -> None:
        shards.finish_shard(self, key, shard, rows=rows, seconds=seconds, row_start=row_start,
                            size=size, sha256=sha256)

    def shard_records(self, key: str) -> dict:
        """shard -> ShardRecord (kiwb.project.shard_files) of every finished shard of `key`."""
        return shards.shard_records(self.connection, key)

    def release_shard(self, key: str, shard: int, owner: str) -> None:
        """Give back an unfinished claim (on a clean stop), so others may take it at once."""
        shards.release_shard(self, key, shard, owner)

    # -- integrations ------------------------------------------------------------------
    def record_integration(
        self, key: str, *, dataset: str, settings: dict[str, Any], summary: dict[str, Any]
    ) -> None:
        """Record an integration; each teacher's facts take with them what the score set it
        read said of its MC dropout (`dropout`), so its record keeps whether its MC figures
        were the teacher's own after that score set is rescored or removed."""
        if "per_teacher" in summary:
            dropout = self.score_dropout({facts["name"]: facts["score_key"]
                                          for facts in summary["per_teacher"]
                                          if facts.get("score_key")})
            summary = {**summary, "per_teacher": [
                {**facts, **({"dropout": dropout[facts["name"]]} if facts["name"] in dropout
                             else {})} for facts in summary["per_teacher"]]}
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO integrations VALUES (?, ?, ?, ?, ?)",
                (key, dataset, json.dumps(settings), json.dumps(summary), time.time()),
            )

    def score_dropout(self, score_keys: dict[str, str]) -> dict[str, dict]:
        """teacher -> what its score set (`score_keys`: teacher -> key) recorded of its MC
        dropout (kiwb.project.dropout_rates.score_set_dropout); sets scored before kiwb
        checked are left out."""
        found = {}
        for teacher, key in score_keys.items():
            row = self.connection.execute("SELECT meta_json FROM score_sets WHERE key = ?",
                                          (key,)).fetchone()
            facts = score_set_dropout(json.loads(row[0])) if row is not None else None
            if facts is not None:
                found[teacher] = facts
        return found

    def integration(self, key: str) -> dict[str, Any] | None:
        row = self.connection.execute("SELECT * FROM integrations WHERE key=?", (key,)).fetchone()
        return _integration(row) if row is not None else None

    def integrations_asked(self, settings: dict[str, Any]) -> list[dict[str, Any]]:
        """The recorded integrations of the unlabeled data asked with exactly these settings,
        newest first: the candidates a training run reads its targets from (its key decides)."""
        wanted = json.loads(json.dumps(settings))  # as stored: tuples read back as lists
        rows = self.connection.execute(
            "SELECT * FROM integrations WHERE dataset = 'unlabeled' ORDER BY created_at DESC")
        return [_integration(row) for row in rows if json.loads(row["settings_json"]) == wanted]

    # -- events (kiwb.project.events) ----------------------------------------------------
    def append_event(
        self, kind: str, data: dict[str, Any], job_id: int | None = None, run: str | None = None
    ) -> int:
        with self.transaction() as db:
            return events.insert_event(db, kind, data, job_id=job_id, run=run)

    def events_after(
        self, after_id: int = 0, *, job_id: int | None = None, run: str | None = None,
        kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """Events with id > after_id, oldest first, optionally of one job, run or kind."""
        return events.events_after(self.connection, after_id, job_id=job_id, run=run, kind=kind)


def _integration(row) -> dict[str, Any]:
    """An integrations row as a dict (IntegrationRecord.from_dict reads it)."""
    return {
        "key": row["key"],
        "dataset": row["dataset"],
        "settings": json.loads(row["settings_json"]),
        "summary": json.loads(row["summary_json"]),
        "created_at": row["created_at"],
    }
