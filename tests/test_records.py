"""The typed store records: exact JSON both ways, older records read once the store has
migrated them, a missing key refused in one line, and lineage read from what an integration
recorded."""

from __future__ import annotations

import dataclasses
import io
import json
import sqlite3

import numpy as np
import pytest
from tui_support import (
    INTEGRATION_KEY,
    LABELS_A,
    SCORE_KEYS,
    TEXTS,
    integration_summary,
    scores,
    synthetic_project,
)

from kiwb.errors import KiwbError
from kiwb.project.paths import ProjectPaths
from kiwb.project.queries import latest_integration, teacher_views
from kiwb.project.records import (
    ClassFunnel,
    IntegrationRecord,
    IntegrationSettings,
    IntegrationSummary,
    LabeledFunnel,
    RoutingAccuracy,
    ScoreJobSummary,
    train_event,
)
from kiwb.project.schema import renamed_v6
from kiwb.project.store import Store

# An integration summary as the first kiwb release wrote it: no teachers, score keys, routing
# details or per-teacher accuracies.
FIRST_RELEASE_SUMMARY = {
    "num_texts": 10, "labels": ["sports", "politics", "music", "cooking"],
    "overlapping_labels": [], "wins": {"a": 6, "b": 4},
    "margin_quantiles": {"0.0": 0.0, "0.5": 0.2, "1.0": 0.9}, "margin_histogram": [1] * 20,
    "conflict_threshold": 0.1, "conflicts": 2,
    "routing_accuracy": {"mc_dropout": 0.9, "plain_entropy": 0.7},
    "eval": {"num_texts": 10, "routing_accuracy": {"mc_dropout": 0.8, "plain_entropy": 0.6},
             "ensemble_accuracy": 0.5},
}


def test_a_summary_written_today_reads_back_to_the_same_json():
    stored = json.loads(json.dumps(integration_summary([0.1, 0.5, 0.9]).to_dict()))
    assert IntegrationSummary.from_dict(stored).to_dict() == stored
    assert json.dumps(IntegrationSummary.from_dict(stored).to_dict()) == json.dumps(stored)


FIRST_RELEASE_SETTINGS = {"method": "muki-hard", "tau": 0.2, "reweight": True, "use_mc": True,
                          "conflict_threshold": 0.1}


def _stored_as_the_first_release_did(root, key: str, summary: dict, created_at: float) -> None:
    """An integration row as the first release wrote it, in a store marked version 5: the next
    open migrates it."""
    with sqlite3.connect(ProjectPaths(root).store) as db:
        db.execute("INSERT INTO integrations VALUES (?, 'unlabeled', ?, ?, ?)",
                   (key, json.dumps(FIRST_RELEASE_SETTINGS), json.dumps(summary), created_at))
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


def test_a_first_release_integration_reads_as_this_release_writes_it_once_migrated(tmp_path):
    """Versions 6 and 7 rewrite it: plain_entropy renamed, and the keys added since written in
    with what the record meant (its teachers in the order of its wins, the sequence kind, the
    score sets it read; settings that compared raw confidences and used no labels)."""
    root = synthetic_project(tmp_path / "proj", integrated=False, trained=False)
    _stored_as_the_first_release_did(root, "old", FIRST_RELEASE_SUMMARY, 2e9)
    with Store(ProjectPaths(root).store) as store:
        stored = store.integration("old")
        record = IntegrationRecord.from_dict(stored)
    summary, settings = record.summary, record.settings
    assert summary.teachers == ["a", "b"] and summary.teachers_kind == "sequence"
    assert summary.score_keys == SCORE_KEYS  # the synthetic project's only score sets
    assert summary.routing_accuracy == RoutingAccuracy(mc_dropout=0.9, plain_confidence=0.7)
    assert summary.eval.routing_accuracy.plain_confidence == 0.6
    assert summary.routing is None and summary.eval.teacher_accuracy is None
    assert summary.to_dict() == stored["summary"]
    assert (settings.routing, settings.labels, settings.class_weighting) == \
        ("confidence", False, 0.0)
    assert settings.to_dict() == {**FIRST_RELEASE_SETTINGS, **stored["settings"]}


def test_renaming_task_kind_touches_a_summarys_own_key_only():
    renamed = renamed_v6({**FIRST_RELEASE_SUMMARY, "task_kind": "token"}, summary=True)
    assert renamed["teachers_kind"] == "token" and "task_kind" not in renamed
    # a key of that name deeper down (a job's settings) is not a kind
    assert renamed_v6({"settings": {"task_kind": "x"}}) == {"settings": {"task_kind": "x"}}


@pytest.mark.parametrize(("record", "data", "message"), [
    (IntegrationSummary, {k: v for k, v in integration_summary([0.5]).to_dict().items()
                          if k != "per_teacher"},
     "integration summary has no 'per_teacher' (it has: num_texts, labels, "),
    (ScoreJobSummary, {"precision": "float32"}, "score job summary has no 'texts' (it has: precision)"),
    (IntegrationSettings, {"method": "uhc"}, "integration settings has no 'tau' (it has: method)"),
])
def test_a_record_missing_a_required_key_is_refused_in_one_line(record, data, message):
    with pytest.raises(KiwbError) as raised:
        record.from_dict(data)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_nested_records_name_what_is_missing():
    broken = {**integration_summary([0.5]).to_dict()}
    broken["per_teacher"] = [{"name": "a", "labels": ["x"]}]
    with pytest.raises(KiwbError, match=r"^teacher facts has no 'wins' \(it has: name, labels\)"):
        IntegrationSummary.from_dict(broken)
    broken = {**integration_summary([0.5]).to_dict()}
    broken["eval"] = {k: v for k, v in broken["eval"].items() if k != "num_texts"}
    with pytest.raises(KiwbError, match=r"^integration eval summary has no 'num_texts'"):
        IntegrationSummary.from_dict(broken)
    with pytest.raises(KiwbError, match=r"^unknown training event 'train\.bogus'"):
        train_event("train.bogus", {})


def _write_decoy_scores(root, store, teacher: str, key: str, created_at: float) -> None:
    """A complete score set of `teacher` on the same texts that the integration did not read."""
    store.register_score_set(key, teacher=teacher, dataset="unlabeled", num_texts=len(TEXTS),
                             num_shards=1, meta={"labels": list(LABELS_A), "shard_size": 16})
    store.claim_shard(key, 0, "test")
    buffer = io.BytesIO()
    np.savez(buffer, **scores(0, len(TEXTS), seed=7))
    paths = ProjectPaths(root)
    paths.score_dir(key).mkdir(parents=True, exist_ok=True)
    paths.shard_file(key, 0).write_bytes(buffer.getvalue())
    store.finish_shard(key, 0, rows=len(TEXTS), seconds=1.0)
    store.connection.execute("UPDATE score_sets SET created_at = ? WHERE key = ?", (created_at, key))


def test_teacher_views_read_the_score_sets_the_integration_recorded(tmp_path):
    """A newer score set of teacher a, made before the integration and of the same size, is the
    one a guess by teacher, size and date would take; the recorded score key wins."""
    root = synthetic_project(tmp_path / "proj", trained=False)
    with Store(ProjectPaths(root).store) as store:
        integration = latest_integration(store)
        assert integration.key == INTEGRATION_KEY and integration.summary.score_keys == SCORE_KEYS
        _write_decoy_scores(root, store, "a", "decoy-a", integration.created_at - 0.001)
        views = teacher_views(root, store, integration, 1)
    recorded = scores(0, len(TEXTS), seed=1)
    assert [view.teacher for view in views] == ["a", "b"]
    assert views[0].mc_confidence == pytest.approx(float(recorded["mc_confidence"][1]))
    assert views[0].mc_confidence != pytest.approx(float(scores(0, len(TEXTS), seed=7)["mc_confidence"][1]))


def test_an_integration_from_before_score_keys_reads_the_score_sets_made_before_it(tmp_path):
    """Version 7 names the score sets such an integration read: each teacher's newest complete
    one of its size made before it, not a newer one made after."""
    root = synthetic_project(tmp_path / "proj", integrated=False, trained=False)
    with Store(ProjectPaths(root).store) as store:
        made = store.score_set(SCORE_KEYS["a"])["created_at"]
        _write_decoy_scores(root, store, "a", "later-a", made + 100.0)
    _stored_as_the_first_release_did(root, "old", FIRST_RELEASE_SUMMARY, made + 50.0)
    with Store(ProjectPaths(root).store) as store:
        integration = IntegrationRecord.from_dict(store.integration("old"))
        assert integration.summary.score_keys == SCORE_KEYS
        views = teacher_views(root, store, integration, 2)
    assert [view.teacher for view in views] == ["a", "b"]
    assert views[1].det_confidence == pytest.approx(
        float(scores(1, len(TEXTS), seed=2)["det_confidence"][2]))


def test_the_class_funnel_names_the_step_before_the_student_that_loses_each_class():
    # per class, the share of its eval texts that survive each step (halving or worse loses it)
    labeled = LabeledFunnel(where="eval", gold=[10, 10, 10, 0, 10],
                            owner_recall=[0.9, 0.9, 0.2, None, 0.8],
                            routed_recall=[0.8, 0.3, 0.2, None, 0.7],
                            target_recall=[0.8, 0.3, 0.2, None, 0.3])
    funnel = ClassFunnel(labels=["a", "b", "c", "d", "e"], owners={}, num_texts=100,
                         owner_says=[0] * 5, routed_to_owner=[0] * 5, target_texts=[0] * 5,
                         target_share=[0.0] * 5, estimated_share=[0.0] * 5, labeled=labeled)
    # a survives; b falls 0.9 -> 0.3 at routing; c's owner says it for 2 in 10; d has no eval
    # texts (left out); e falls 0.7 -> 0.3 at the targets
    assert funnel.lost_at() == {"a": None, "b": "routing", "c": "owner", "e": "targets"}
    assert dataclasses.replace(funnel, labeled=None).lost_at() == {}


def test_an_integration_key_holds_a_setting_only_while_it_is_on():
    """Keys are hashes no migration can make again: a setting a later kiwb added is left out
    at its off value, so the keys of older integrations keep matching; a kind keeps what its
    keys always held, or pins a setting its own way."""
    default = IntegrationSettings(routing="rank")
    assert default.keyed() == {"method": "muki-hard", "tau": 0.2, "reweight": True,
                               "use_mc": True, "conflict_threshold": 0.1, "routing": "rank"}
    on = IntegrationSettings(routing="rank", labels=True, class_weighting=0.5)
    assert on.keyed() == {**default.keyed(), "labels": True, "class_weighting": 0.5}
    assert default.keyed(kept=("labels",)) == {**default.keyed(), "labels": False}  # multi-task
    assert on.keyed(left_out=("labels",)) == {**default.keyed(), "class_weighting": 0.5}
    transfer = IntegrationSettings(method="ant", routing="confidence", transfer=True)
    assert transfer.keyed()["transfer"] is True and "transfer" not in default.keyed()
