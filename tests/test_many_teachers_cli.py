"""Three and five tiny real teachers (issue 31), end to end: scored, integrated with the
default routing and with MC confidence routing, over ten topics split as MUKI's Table 3
splits THUCNews ({3,3,4} and {2,2,2,2,2}). Every teacher wins the texts of its own topics
far more often than chance, margins and conflicts are those of N teachers, and the
Ensemble answers over the union of the ten labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_kiwb, write_project
from tiny import ALL_TOPICS, build_teacher, make_texts, write_jsonl

pytestmark = pytest.mark.slow

TOPICS = tuple(ALL_TOPICS)  # the ten labels, in a fixed order
SPLITS = {3: (3, 3, 4), 5: (2, 2, 2, 2, 2)}


def groups(count: int) -> list[tuple[str, ...]]:
    found, start = [], 0
    for size in SPLITS[count]:
        found.append(TOPICS[start:start + size])
        start += size
    return found


@pytest.fixture(scope="module", params=sorted(SPLITS), ids=lambda count: f"{count}-teachers")
def integrated(request, tmp_path_factory) -> tuple[int, Path, dict]:
    """A project of N tiny teachers over the ten topics, scored and integrated."""
    count = request.param
    root = tmp_path_factory.mktemp(f"teachers{count}")
    teachers = {f"t{index + 1}": build_teacher(root / f"t{index + 1}", "bert", labels,
                                               seed=10 * count + index, topics=TOPICS)
                for index, labels in enumerate(groups(count))}
    write_jsonl(root / "pool.jsonl", [{"text": row["text"]} for row in
                                      make_texts(100, seed=31, labels=TOPICS)])
    write_jsonl(root / "eval.jsonl", make_texts(60, seed=32, labels=TOPICS))
    project = write_project(root / "proj", teachers, root / "pool.jsonl", root / "eval.jsonl")
    run_kiwb("score", project, "--foreground", cwd=root)
    summary = json.loads(run_kiwb("integrate", project, "--json", cwd=root).stdout)
    return count, project, summary


def test_the_union_is_every_teachers_labels_and_each_teacher_wins_its_own(integrated):
    count, _, summary = integrated
    assert summary["teachers"] == [f"t{index + 1}" for index in range(count)]
    assert sorted(summary["labels"]) == sorted(TOPICS) and not summary["overlapping_labels"]
    assert sum(summary["wins"].values()) == summary["num_texts"] == 100
    # each teacher owns 2 to 4 of the 10 topics: the routing gives it its share, roughly
    for index, labels in enumerate(groups(count)):
        share = summary["wins"][f"t{index + 1}"] / 100
        assert abs(share - len(labels) / 10) < 0.15, (count, summary["wins"])


def test_routing_picks_the_right_teacher_far_above_chance(integrated):
    count, _, summary = integrated
    chosen = summary["eval"]["routing_accuracy"]["chosen"]
    assert chosen >= 0.8, (count, summary["eval"]["routing_accuracy"])  # chance: 1 in count
    assert summary["eval"]["ensemble_accuracy"] >= 0.7
    assert len(summary["eval"]["teacher_accuracy"]) == count


def test_mc_confidence_routing_and_the_margins_of_n_teachers(integrated):
    count, project, summary = integrated
    confidence = json.loads(run_kiwb("integrate", project, "--routing", "confidence", "--json",
                                     cwd=project.parent).stdout)
    assert confidence["routing"]["name"] == "confidence"
    assert confidence["eval"]["routing_accuracy"]["chosen"] >= 0.8
    # every text's margin is between the two most confident of its N teachers' scores, the
    # text goes to the most confident, and the conflicts are the margins under the threshold
    import sqlite3

    with sqlite3.connect(project / "store.sqlite") as db:
        key = db.execute("SELECT key FROM integrations ORDER BY created_at DESC LIMIT 1").fetchone()[0]
        rows = db.execute("SELECT margin, routed, confidences FROM instances WHERE integration = ?",
                          (key,)).fetchall()
    assert len(rows) == 100
    for margin, routed, confidences in rows:
        scores = json.loads(confidences)
        ordered = sorted(scores)
        assert len(scores) == count and scores.index(ordered[-1]) == routed
        assert margin == pytest.approx(ordered[-1] - ordered[-2], abs=1e-6)
    threshold = confidence["conflict_threshold"]
    assert confidence["conflicts"] == sum(margin < threshold for margin, _, _ in rows)
