"""Labels end to end on tiny real teachers: `kiwb labels import|export|list`, then integration
and training with the labels (one-hot targets, none left out, stacked refitted, evaluation
without the labeled texts)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_kiwb, write_project
from conftest import TRAINING_SETTINGS
from tiny import make_texts, write_jsonl

POOL = make_texts(120, seed=51)
EVAL = make_texts(30, seed=52)
LABELED_ROWS = list(range(0, 24, 2))  # 12 pool texts get their gold label
NONE_ROWS = [1, 3]                     # two are marked none of these labels

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory, teachers_dir, student_base) -> Path:
    root = tmp_path_factory.mktemp("labels")
    write_jsonl(root / "pool.jsonl", POOL)
    write_jsonl(root / "eval.jsonl", EVAL)
    folder = write_project(root / "proj", {"a": teachers_dir / "teacher_a",
                                           "b": teachers_dir / "teacher_b"},
                           root / "pool.jsonl", root / "eval.jsonl",
                           extra=f'{TRAINING_SETTINGS}student = "{student_base}"\n')
    run_kiwb("score", folder, cwd=root)
    rows = ([{"text": POOL[i]["text"], "label": POOL[i]["label"]} for i in LABELED_ROWS]
            + [{"text": POOL[i]["text"], "label": "none"} for i in NONE_ROWS]
            + [{"text": EVAL[0]["text"], "label": EVAL[0]["label"]}])  # one eval text too
    write_jsonl(root / "given.jsonl", rows)
    said = run_kiwb("labels", "import", folder, root / "given.jsonl", cwd=root).stdout
    assert "imported 15 labels" in said and "(2 none of these labels)" in said
    return folder


def stored_labels(project: Path) -> list[tuple]:
    with sqlite3.connect(project / "store.sqlite") as db:
        return db.execute("SELECT text, label FROM text_labels ORDER BY text").fetchall()


def test_integration_with_labels_fits_stacked_on_them_and_trains_them_one_hot(project):
    summary = json.loads(run_kiwb("integrate", project, "--labels", "--routing", "stacked",
                                  "--json", cwd=project).stdout)
    used = summary["gold_labels"]
    assert (used["labeled"], used["left_out"], used["routing_labels"]) == (12, 2, 12)
    assert summary["routing"]["labeled_texts"] == 12  # the stacked model was fitted on them
    assert used["eval_left_out"] == 1 and summary["eval"]["num_texts"] == len(EVAL) - 1
    with sqlite3.connect(project / "store.sqlite") as db:
        targets = dict(db.execute("SELECT row, target FROM instances WHERE integration = ?",
                                  (summary["key"],)).fetchall())
    labels = summary["labels"]
    assert all(labels[targets[i]] == POOL[i]["label"] for i in LABELED_ROWS)

    # The same targets as the student sees them: one-hot at full weight, none at weight 0.
    from kiwb.kinds.sequence.integration import (
        IntegrationSettings,
        integrate_pool,
        scores_from_tasks,
    )
    from kiwb.project.config import load_config
    from kiwb.project.store import Store
    from kiwb.workers.score import plan_scoring

    config = load_config(project)
    with Store(project / "store.sqlite") as store:
        tasks = [task for task in plan_scoring(config, store) if task.dataset == "unlabeled"]
        scores = scores_from_tasks(config, store, tasks)
        texts = tasks[0].table.texts
        with_labels = integrate_pool(IntegrationSettings(routing="stacked", labels=True), store,
                                     scores, texts, None)
        without = integrate_pool(IntegrationSettings(), store, scores, texts, None)
    result = with_labels.result
    for row in LABELED_ROWS:
        assert result.weights[row] == 1.0
        assert result.targets[row].tolist() == [float(label == POOL[row]["label"]) for label in labels]
    assert [float(result.weights[row]) for row in NONE_ROWS] == [0.0, 0.0]
    others = [row for row in range(len(POOL)) if row not in LABELED_ROWS + NONE_ROWS]
    assert float(result.weights[others].max()) < 1.0  # the rest keep their margin weights
    assert with_labels.fitted.name == "stacked" and without.gold is None


def test_training_with_labels_leaves_out_none_and_records_the_labels(project):
    done = run_kiwb("train", project, "--labels", "--routing", "stacked", "--epochs", "1",
                    "--foreground", cwd=project)
    said = done.stdout + done.stderr
    assert "muki-hard-stacked-labels" in said
    assert f"{len(POOL) - len(NONE_ROWS):,} texts" in said  # the two none texts are not trained on
    manifest = json.loads((project / "runs" / "muki-hard-stacked-labels" / "manifest.json").read_text())
    assert manifest["method"]["labels"] is True and manifest["given_labels"]


def test_export_and_import_round_trip_and_a_bad_file_changes_nothing(project, tmp_path):
    before = stored_labels(project)
    for suffix in (".csv", ".jsonl"):
        exported = tmp_path / f"labels{suffix}"
        assert "wrote 15 labels" in run_kiwb("labels", "export", project, exported, cwd=tmp_path).stdout
        said = run_kiwb("labels", "import", project, exported, "--replace", cwd=tmp_path).stdout
        assert "imported 15 labels" in said and "replaced" in said
        assert stored_labels(project) == before

    bad = tmp_path / "bad.csv"
    bad.write_text(f"text,label\n{POOL[40]['text']},sports\n{POOL[41]['text']},opera\n",
                   encoding="utf-8")
    refused = run_kiwb("labels", "import", project, bad, cwd=tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "bad.csv, line 3: unknown label 'opera'; use one of" in refused.stderr
    assert "sports" in refused.stderr and "none for none of these labels" in refused.stderr
    latin = tmp_path / "latin.csv"
    latin.write_bytes("text,label\ncaf\xe9 au lait,cooking\n".encode("latin-1"))
    refused = run_kiwb("labels", "import", project, latin, cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "line 2: not UTF-8 text" in refused.stderr
    no_label = tmp_path / "no-label.jsonl"
    write_jsonl(no_label, [{"text": "x", "tag": "sports"}])
    refused = run_kiwb("labels", "import", project, no_label, cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "no 'label' column" in refused.stderr
    assert stored_labels(project) == before  # nothing was written by any bad file

    # A file naming a text twice, and a text no data set holds: counted as texts, and said.
    repeated = tmp_path / "repeated.jsonl"
    write_jsonl(repeated, [{"text": POOL[0]["text"], "label": "none"},
                           {"text": POOL[0]["text"], "label": POOL[0]["label"]},
                           {"text": POOL[2]["text"] + " ", "label": POOL[2]["label"]}])
    said = " ".join(run_kiwb("labels", "import", project, repeated, cwd=tmp_path).stdout.split())
    assert "imported 2 labels" in said and "1 more line(s) named a text already named" in said
    assert "1 of them match no text of the project's data" in said
    with sqlite3.connect(project / "store.sqlite") as db:  # the last line counted; then put back
        assert db.execute("SELECT label FROM text_labels WHERE text = ?",
                          (POOL[0]["text"],)).fetchone() == (POOL[0]["label"],)
        db.execute("DELETE FROM text_labels WHERE text = ?", (POOL[2]["text"] + " ",))
    assert stored_labels(project) == before

    listed = json.loads(run_kiwb("labels", "list", project, "--json", cwd=tmp_path).stdout)
    assert len(listed) == 15 and sum(item["label"] == "none" for item in listed) == 2
    shown = run_kiwb("labels", "list", project, cwd=tmp_path).stdout
    assert "15 labels" in shown and "none 2" in shown
