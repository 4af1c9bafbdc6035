"""The multi-label kind end to end through the real CLI, on tiny real sigmoid teachers built
here (A knows sports, politics, music; B knows music, cooking, and was taught music
wrongly on a third of its texts: music is shared, and its owners disagree): score,
integrate (ANT, transfer, MUKI per label), train, evaluate, export (loaded by transformers'
text-classification pipeline with sigmoid scores), predict; and its bad input, each one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_bad_input import assert_refused, run_kiwb
from tiny import TEACHER_A_LABELS, build_teacher, tiny_bert_config, wordpiece_tokenizer, write_jsonl
from tiny_multilabel import (
    TEACHER_A_TAGS,
    TEACHER_B_TAGS,
    build_multilabel_teacher,
    make_tagged_texts,
)

from kiwb.project.run_folder import read_best

pytestmark = pytest.mark.slow

UNION = ["sports", "politics", "music", "cooking"]
TRAINING = """
[training]
student = "{student}"
epochs = 6
min_steps = 0
learning_rate = 0.006
batch_size = 16
eval_every = 20
"""


@pytest.fixture(scope="module")
def ml_root(tmp_path_factory) -> Path:
    """Two tiny multi-label teachers, a student base, a pool (its gold labels kept, for the
    supervised run) and a labeled eval set."""
    import torch
    from transformers import BertForSequenceClassification

    root = tmp_path_factory.mktemp("multilabel")
    build_multilabel_teacher(root / "teacher_a", TEACHER_A_TAGS, seed=1)
    # B was taught music wrongly on a third of its texts: the two owners of music disagree.
    build_multilabel_teacher(root / "teacher_b", TEACHER_B_TAGS, seed=2, noisy=("music", 0.35))
    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(None)
    BertForSequenceClassification(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(
        root / "base")
    tokenizer.save_pretrained(root / "base")
    write_jsonl(root / "pool.jsonl", make_tagged_texts(160, seed=21))
    write_jsonl(root / "eval.jsonl", make_tagged_texts(48, seed=22))
    return root


def write_ml_project(project: Path, root: Path, *, teachers=None, eval_file: Path | None = None,
                     extra: str = "") -> Path:
    teachers = teachers or {"a": root / "teacher_a", "b": root / "teacher_b"}
    project.mkdir(parents=True, exist_ok=True)
    lines = ['name = "tags"']
    for name, path in teachers.items():
        lines += ["[[teachers]]", f"name = {json.dumps(name)}", f"path = {json.dumps(str(path))}"]
    lines += ["[data.unlabeled]", f"path = {json.dumps(str(root / 'pool.jsonl'))}",
              'label_column = "labels"',
              "[data.eval]", f"path = {json.dumps(str(eval_file or root / 'eval.jsonl'))}",
              'label_column = "labels"', "[scoring]", "mc_passes = 4", "shard_size = 64",
              'device = "cpu"', TRAINING.format(student=root / "base"), extra]
    (project / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return project


@pytest.fixture(scope="module")
def scored(ml_root, tmp_path_factory) -> Path:
    project = write_ml_project(tmp_path_factory.mktemp("proj") / "proj", ml_root)
    done = run_kiwb("score", project, "--foreground", cwd=project.parent)
    assert done.returncode == 0, done.stderr
    return project


def integrate(project: Path, *options: str) -> dict:
    done = run_kiwb("integrate", project, *options, "--json", cwd=project.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_integration_decides_each_label_over_its_owners(scored):
    summary = integrate(scored)
    assert summary["teachers_kind"] == "multi-label"
    assert summary["labels"] == UNION and summary["overlapping_labels"] == ["music"]
    assert summary["teacher_labels"] == {"a": list(TEACHER_A_TAGS), "b": list(TEACHER_B_TAGS)}
    assert summary["routing"]["name"] == "confidence"  # the kind's, from routing = "auto"
    details = summary["details"]
    assert details["texts"] == summary["num_texts"] == 160 and details["shared_labels"] == ["music"]
    # wins count the (text, shared label) pairs: one shared label, 160 texts
    assert sum(summary["wins"].values()) == 160
    evaluation = summary["eval"]
    # each teacher alone says no to the labels it does not own: the owners' mean beats both
    assert evaluation["ensemble_accuracy"] > max(evaluation["teacher_accuracy"].values())
    assert 0 <= evaluation["routing_accuracy"]["chosen"] <= 1
    assert set(details["eval"]["targets"]["per_label_f1"]) == set(UNION)
    for method in ("ant", "vote", "mean", "muki-soft"):
        other = integrate(scored, "--method", method)
        assert other["teachers_kind"] == "multi-label" and other["num_texts"] == 160
    transferred = integrate(scored, "--method", "ant", "--transfer")
    assert transferred["details"]["transfer"] is True


def test_a_conflict_labeled_yes_or_no_becomes_a_target(scored, tmp_path):
    """The conflicts list holds (text, shared label) pairs whose owners disagree, as
    "[label] text"; a yes (the label) or a no (none) given to one is taught at weight 1."""
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    project = shutil.copytree(scored, tmp_path / "proj")
    key = integrate(project)["key"]
    with Store(ProjectPaths(project).store) as store:
        rows = store.connection.execute(
            "SELECT text, confidences FROM instances WHERE integration = ? ORDER BY margin",
            (key,)).fetchall()
    assert rows, "the tiny teachers never disagree on music: no conflict to label"
    text, details = rows[0][0], json.loads(rows[0][1])
    assert text.startswith("[music] ") and details["label"] == "music"
    assert set(details["owners"]) == {"a", "b"} and len(details["probs"]) == 2
    labels = tmp_path / "labels.csv"
    answer = "none" if details["decided"] == "yes" else "music"  # against the decision
    labels.write_text(f"text,label\n{json.dumps(text)},{answer}\n", encoding="utf-8")
    done = run_kiwb("labels", "import", project, labels, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    given = integrate(project, "--labels")
    assert given["details"]["labeled_pairs"] == 1
    _a_run_reads_the_targets_kept(project, given["key"])


def _a_run_reads_the_targets_kept(project: Path, key: str) -> None:
    """A training run of the integration's settings reads the (text, label) targets kept
    beside it (the labeled pair's among them) by its key, and pins the key."""
    import torch

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.store import Store
    from kiwb.project.teacher_kinds import load_project
    from kiwb.workers.integration_targets import load_targets
    from kiwb.workers.train import prepare
    from kiwb.workers.training_data import TrainRequest

    kept = load_targets(project, key)
    assert kept["targets"].shape == kept["weights"].shape == (160, len(UNION))
    assert (kept["weights"] == 1.0).any()  # the pair given a yes or a no, at full weight
    loaded = load_project(project)
    with Store(ProjectPaths(project).store) as store:
        settings = IntegrationSettings.from_dict(store.integration(key)["settings"])
        data = prepare(loaded.config, store, TrainRequest(run="r", settings=settings),
                       loaded.kind)
    assert data.manifest["integration"] == key and data.manifest["given_labels"] is not None
    assert torch.equal(data.targets, kept["targets"]) and torch.equal(data.weights, kept["weights"])


def test_train_evaluate_export_and_the_pipeline(scored, ml_root, tmp_path):
    project = shutil.copytree(scored, tmp_path / "proj")
    for run, method in (("hard", "muki-hard"), ("gold", "supervised")):
        done = run_kiwb("train", project, "--run", run, "--method", method, "--foreground",
                        cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "eval micro F1" in done.stdout + done.stderr
    # The distilled student says yes where its targets do, at 0.5 (from a head bias of 0 the
    # demo's students never did: their heads now start at the labels' log-odds).
    best = read_best(project / "runs" / "hard")["metrics"]
    assert _says_every_label(best["check"]) and best["details"]["micro_f1"] > 0.5
    assert best["metric"] == "micro F1" and best["accuracy"] == best["details"]["micro_f1"]
    report = json.loads(run_kiwb("evaluate", project, "--run", "hard", "--json",
                                 cwd=tmp_path).stdout)
    assert report["kind"] == "multi-label" and set(report["per_label_f1"]) == set(UNION)
    for name in ("micro_f1", "macro_f1", "hamming_loss", "subset_accuracy"):
        assert 0 <= report[name] <= 1
    # thresholds were tuned on the eval set and travel with the checkpoint
    assert set(report["thresholds"]) == set(UNION)
    # --data is read as the kind reads its eval set: a list of labels per row
    elsewhere = json.loads(run_kiwb("evaluate", project, "--run", "hard", "--data",
                                    ml_root / "eval.jsonl", "--json", cwd=tmp_path).stdout)
    assert elsewhere["micro_f1"] == report["micro_f1"]
    gold = json.loads(run_kiwb("evaluate", project, "--run", "gold", "--json",
                               cwd=tmp_path).stdout)
    assert gold["micro_f1"] > 0.5  # the gold-trained student learns the four topics
    out = tmp_path / "exported"
    done = run_kiwb("export", project, "--run", "hard", "--to", out, "--foreground", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert set(config["label_thresholds"]) == set(UNION)
    from transformers import pipeline

    classify = pipeline("text-classification", model=str(out), top_k=None,
                        function_to_apply="sigmoid")
    scores = classify(["goal match team album concert"])[0]
    assert {row["label"] for row in scores} == set(UNION)
    assert all(0 < row["score"] < 1 for row in scores)
    assert abs(sum(row["score"] for row in scores) - 1) > 1e-3  # sigmoids, not a softmax
    printed = " ".join(run_kiwb("predict", out, "goal match team album concert",
                                cwd=tmp_path).stdout.split())
    said = printed.split("%")[0].rsplit(" ", 2)[0]  # the labels over threshold, before the top 3
    assert printed.endswith("goal match team album concert") and printed.count("%") == 3
    assert said == "(none)" or set(said.split(", ")) <= set(UNION)


def test_bad_input_is_one_line(ml_root, tmp_path):
    single = build_teacher(tmp_path / "single", "bert", TEACHER_A_LABELS, trained=False)
    mixed = write_ml_project(tmp_path / "mixed", ml_root,
                             teachers={"a": ml_root / "teacher_a", "s": single})
    assert_refused(run_kiwb("score", mixed, "--foreground", cwd=tmp_path),
                   "different kinds", "multi-label: a", "sequence: s")
    unknown = write_jsonl(tmp_path / "unknown.jsonl", [{"text": "goal", "labels": ["weather"]}])
    project = write_ml_project(tmp_path / "unknown", ml_root, eval_file=unknown)
    assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path),
                   "'weather'", "no teacher knows")
    flat = write_jsonl(tmp_path / "flat.jsonl", [{"text": "goal", "labels": "sports;music"}])
    project = write_ml_project(tmp_path / "flat", ml_root, eval_file=flat)
    assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path),
                   "not a list of labels", "label_separator")
    project = write_ml_project(tmp_path / "routing", ml_root)
    assert_refused(run_kiwb("integrate", project, "--routing", "rank", cwd=tmp_path),
                   "routing 'rank'", "per label")


def test_a_student_with_kiwbs_default_budget_fits_its_targets(scored, tmp_path):
    """kiwb's default minimum, tripled for a sigmoid head, teaches the tiny student its targets
    (fit >= 0.9); at the 300 steps every kind took before, it did not (fit 0.80 when this was
    written)."""
    project = shutil.copytree(scored, tmp_path / "proj")
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace("min_steps = 0\n", "")
                      .replace("learning_rate = 0.006\n", ""))  # kiwb's defaults
    done = run_kiwb("train", project, "--run", "default", "--foreground", cwd=tmp_path)
    said = " ".join((done.stdout + done.stderr).split())
    assert "a sigmoid head learns each of its 4 outputs as its own yes or no, which takes 3x min_steps" in said
    best = read_best(project / "runs" / "default")["metrics"]
    fits = [event["fit"] for event in _train_evals(project, "default")]
    assert fits[-1] >= 0.9 and _says_every_label(best["check"])


def _says_every_label(check: dict) -> bool:
    """No label collapsed. The tiny teachers' owners' mean may still beat the student at 0.5:
    then the check says so, in the words every kind uses (kiwb.core.learning_check)."""
    if check["status"] == "below-reference":
        return check["problem"].startswith("below the owners' mean (") and not check["collapsed"]
    return check["status"] == "ok"


def _train_evals(project: Path, run: str) -> list[dict]:
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    with Store(ProjectPaths(project).store) as store:
        return [event["data"] for event in store.events_after(run=run, kind="train.eval")]
