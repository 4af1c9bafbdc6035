"""The token kind end to end through the real CLI, on tiny real NER teachers built here: score,
integrate, train, evaluate, export (loaded by transformers' token-classification pipeline),
predict; and its bad input, each one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_bad_input import assert_refused, run_kiwb, score_files
from tiny import TEACHER_A_LABELS, build_teacher, tiny_bert_config
from tiny_ner import (
    TEACHER_A_TYPES,
    TEACHER_B_TYPES,
    build_ner_teacher,
    make_sentences,
    ner_wordpiece_tokenizer,
    write_jsonl,
)

from kiwb.project.config import load_config
from kiwb.project.job_specs import TrainSpec
from kiwb.project.run_folder import read_best
from kiwb.project.teacher_kinds import load_project
from kiwb.tui.labeling import integrate_with_labels, train_with_labels

pytestmark = pytest.mark.slow

TRAINING = """
[training]
student = "{student}"
epochs = 8
min_steps = 0
learning_rate = 0.006
batch_size = 16
eval_every = 20
"""


@pytest.fixture(scope="module")
def ner_root(tmp_path_factory) -> Path:
    """Two tiny NER teachers (WordPiece BERT on LOC, MISC; byte-level BPE RoBERTa on ORG, PER),
    a student base, a pool of words and a tagged eval set."""
    import torch
    from transformers import BertForTokenClassification

    root = tmp_path_factory.mktemp("ner")
    build_ner_teacher(root / "teacher_a", "bert", TEACHER_A_TYPES, seed=1)
    build_ner_teacher(root / "teacher_b", "roberta", TEACHER_B_TYPES, seed=2)
    torch.manual_seed(0)
    tokenizer = ner_wordpiece_tokenizer()
    BertForTokenClassification(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(
        root / "base")
    tokenizer.save_pretrained(root / "base")
    write_jsonl(root / "pool.jsonl", [{"tokens": row["tokens"]}
                                      for row in make_sentences(160, seed=21)])
    write_jsonl(root / "eval.jsonl", make_sentences(48, seed=22))
    return root


def write_ner_project(project: Path, root: Path, *, teachers=None, eval_file: Path | None = None,
                      extra: str = "") -> Path:
    teachers = teachers or {"a": root / "teacher_a", "b": root / "teacher_b"}
    project.mkdir(parents=True, exist_ok=True)
    lines = ['name = "ner"']
    for name, path in teachers.items():
        lines += ["[[teachers]]", f"name = {json.dumps(name)}", f"path = {json.dumps(str(path))}"]
    lines += ["[data.unlabeled]", f"path = {json.dumps(str(root / 'pool.jsonl'))}",
              'tokens_column = "tokens"']
    evaluation = eval_file or root / "eval.jsonl"
    lines += ["[data.eval]", f"path = {json.dumps(str(evaluation))}", 'tokens_column = "tokens"',
              'tags_column = "tags"', "[scoring]", "mc_passes = 4", "shard_size = 64",
              'device = "cpu"', TRAINING.format(student=root / "base"), extra]
    (project / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return project


@pytest.fixture(scope="module")
def trained(ner_root, tmp_path_factory) -> tuple[Path, dict]:
    """A token project scored, integrated (JSON kept) and trained with MUKI-Hard."""
    project = write_ner_project(tmp_path_factory.mktemp("proj") / "proj", ner_root)
    for args in (("score",), ("train", "--run", "hard")):
        done = run_kiwb(*args, project, "--foreground", cwd=project.parent)
        assert done.returncode == 0, done.stderr
    done = run_kiwb("integrate", project, "--json", cwd=project.parent)
    assert done.returncode == 0, done.stderr
    return project, json.loads(done.stdout)


def test_integration_records_the_token_kind_clusters_and_entity_figures(trained):
    _, integration = trained
    summary = integration  # kiwb integrate --json prints the summary
    assert summary["teachers_kind"] == "token"
    assert summary["labels"] == ["LOC", "MISC", "ORG", "PER", "O"]
    assert summary["teacher_labels"] == {"a": ["LOC", "MISC"], "b": ["ORG", "PER"]}
    token = summary["token"]
    assert token["texts"] == 160 and token["clusters"] == summary["num_texts"] > 0
    assert sum(token["cluster_kinds"].values()) == token["clusters"]
    assert set(token["cluster_kinds"]) <= {"type-clash", "boundary-clash", "entity-vs-none", "agree"}
    evaluation = summary["eval"]
    # each teacher alone finds only its own types: the Ensemble must beat both
    assert evaluation["ensemble_accuracy"] > max(evaluation["teacher_accuracy"].values())
    # teachers of disjoint types: routing per gold entity sends nearly all to their owner
    assert evaluation["routing_accuracy"]["chosen"] >= 0.9
    assert token["windowed_texts"] == {"a": 0, "b": 0}  # every sentence fits max_length
    assert summary["funnel"]["labels"] == ["LOC", "MISC", "ORG", "PER"]
    assert summary["funnel"]["labeled"]["where"] == "eval"


def test_the_token_run_reads_the_word_targets_its_integration_kept(trained, ner_root):
    """`kiwb train` recorded the integration it learnt from (kiwb integrate then found the
    same); a run reads its word targets back by the key, one row per pool word."""
    import torch

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.store import Store
    from kiwb.workers.integration_targets import load_targets
    from kiwb.workers.train import prepare
    from kiwb.workers.training_data import TrainRequest

    project, _ = trained
    key = json.loads((project / "runs" / "hard" / "manifest.json").read_text())["integration"]
    kept = load_targets(project, key)
    words = sum(len(json.loads(line)["tokens"])
                for line in (ner_root / "pool.jsonl").read_text().splitlines())
    assert len(kept["targets"]) == len(kept["weights"]) == words
    loaded = load_project(project)
    with Store(ProjectPaths(project).store) as store:
        settings = IntegrationSettings.from_dict(store.integration(key)["settings"])
        data = prepare(loaded.config, store, TrainRequest(run="again", settings=settings),
                       loaded.kind)
    assert data.manifest["integration"] == key
    assert torch.equal(data.targets, kept["targets"])
    assert data.manifest["class_funnel"] is not None and "routing_check" in data.manifest


def test_a_token_project_routes_by_confidence_unless_kiwb_toml_names_a_routing(trained, tmp_path):
    """[integration] routing = "auto" (the default) is the teachers' kind's: confidence for
    taggers (94.3% of gold entities to their owner on ner-en dev against 75.9% for rank);
    a routing kiwb.toml names is kept."""
    project, integration = trained
    assert integration["routing"]["name"] == "confidence"  # the fixture's kiwb.toml names none
    config = load_config(project)
    assert config.integration.routing == "auto"
    assert load_project(project).config.integration.routing == "confidence"
    # The run a plain `kiwb train` names leaves the kind's default routing out of the name,
    # and the Conflicts pane's r and t fit the kind's labels routing, not stacked (refused here).
    loaded = load_project(project)
    assert TrainSpec().named(loaded.config.integration, loaded.kind.jobs.default_routing).run == "muki-hard"
    assert integrate_with_labels(loaded).routing == "confidence"
    assert train_with_labels(loaded, lambda run: False).routing == "confidence"

    named = shutil.copytree(project, tmp_path / "named")
    write_ner_project(named, trained_root(project), extra='[integration]\nrouting = "rank"')
    done = run_kiwb("integrate", named, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["routing"]["name"] == "rank"


def trained_root(project: Path) -> Path:
    """The folder of the teachers, pool and eval a project of write_ner_project points at."""
    return Path(load_config(project).data.unlabeled.path).parent


def test_train_evaluate_export_and_the_pipeline(trained, tmp_path):
    from transformers import pipeline

    project, _ = trained
    shown = run_kiwb("evaluate", project, "--run", "hard", "--json", cwd=project.parent)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["kind"] == "token" and set(report["per_class_accuracy"]) == {
        "LOC", "MISC", "ORG", "PER"}
    assert report["accuracy"] >= 0.5  # entity F1 of a tiny student trained 80 steps
    assert 0 <= report["entity"]["strict"]["f1"] <= 1
    destination = tmp_path / "tagger"
    done = run_kiwb("export", project, "--run", "hard", "--to", destination, "--foreground",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert 'pipeline("token-classification"' in done.stderr  # the console writes to stderr
    manifest = json.loads((destination / "kiwb-manifest.json").read_text())
    assert manifest["kind"] == "token" and manifest["labels"][0] == "O"
    card = (destination / "README.md").read_text()
    assert "pipeline_tag: token-classification" in card and "## Tags" in card
    tag = pipeline("token-classification", model=str(destination), aggregation_strategy="simple")
    groups = tag("Alice flew to Paris with Acme staff today .")
    assert groups and all(group["entity_group"] in {"LOC", "MISC", "ORG", "PER"}
                          for group in groups)
    predicted = run_kiwb("predict", destination, "Alice flew to Paris .", cwd=tmp_path)
    assert predicted.returncode == 0, predicted.stderr
    assert ":" in predicted.stdout.split("\t")[0]  # "TYPE: words", or "(no entity)"


def test_a_sequence_and_a_token_teacher_are_refused(ner_root, tmp_path):
    build_teacher(tmp_path / "classifier", "bert", TEACHER_A_LABELS, trained=False)
    project = write_ner_project(tmp_path / "proj", ner_root, teachers={
        "tagger": ner_root / "teacher_a", "classifier": tmp_path / "classifier"})
    message = assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path),
                             "different kinds", "sequence: classifier", "token: tagger")
    assert "of one kind" in message
    assert not score_files(project)


def test_an_unrecognised_tag_scheme_is_refused(ner_root, tmp_path):
    import torch
    from transformers import BertForTokenClassification

    folder = tmp_path / "odd"
    tokenizer = ner_wordpiece_tokenizer()
    torch.manual_seed(0)
    odd = ("O", "X-PER", "B-LOC")
    BertForTokenClassification(tiny_bert_config(odd, len(tokenizer))).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    project = write_ner_project(tmp_path / "proj", ner_root, teachers={
        "a": ner_root / "teacher_a", "odd": folder})
    assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path), "teacher 'odd'",
                   "X-PER")


@pytest.mark.parametrize("rows, fragments", [
    ([{"tokens": ["Alice", "left"], "tags": ["B-PER"]}], ["line 1 has 2 words but 1 tags"]),
    ([{"tokens": [], "tags": []}], ["line 1 has no words"]),
    ([{"tokens": ["Alice"]}], ["no column 'tags'", "tags_column"]),
])
def test_bad_eval_files_are_one_line(ner_root, tmp_path, rows, fragments):
    evaluation = write_jsonl(tmp_path / "eval.jsonl", rows)
    project = write_ner_project(tmp_path / "proj", ner_root, eval_file=evaluation)
    assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path), str(evaluation),
                   *fragments)


def test_an_eval_set_without_tags_column_is_refused(ner_root, tmp_path):
    project = write_ner_project(tmp_path / "proj", ner_root)
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace('tags_column = "tags"\n[scoring]',
                                                 'label_column = "tags"\n[scoring]'))
    assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path),
                   "[data.eval]", 'tags_column = "tags"')


def test_a_teacher_without_a_fast_tokenizer_is_refused(ner_root, tmp_path):
    folder = shutil.copytree(ner_root / "teacher_a", tmp_path / "slow")
    # The same WordPiece vocabulary as a vocab.txt and no tokenizer.json, under transformers'
    # slow (Python) BERT tokenizer: it has no word_ids() to align words with.
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    (folder / "vocab.txt").write_text("".join(f"{piece}\n" for piece in sorted(vocab, key=vocab.get)))
    (folder / "tokenizer.json").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "BertTokenizerLegacy"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    project = write_ner_project(tmp_path / "proj", ner_root, teachers={
        "a": folder, "b": ner_root / "teacher_b"})
    assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path),
                   "BertTokenizerLegacy", "fast")
    assert not score_files(project)


def test_texts_longer_than_max_length_are_windowed_and_counted(ner_root, tmp_path):
    project = write_ner_project(tmp_path / "proj", ner_root)
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace("mc_passes = 4", "mc_passes = 2\nmax_length = 8"))
    scored = run_kiwb("score", project, "--foreground", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "texts were longer than max_length and were read in" in scored.stderr
    done = run_kiwb("integrate", project, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    windowed = json.loads(done.stdout)["token"]["windowed_texts"]
    assert windowed["a"] > 0 and windowed["b"] > 0


def test_labels_name_spans_and_a_span_no_text_holds_is_refused(trained, tmp_path):
    import sqlite3

    from kiwb.project.paths import ProjectPaths

    project, _ = trained
    with sqlite3.connect(ProjectPaths(project).store) as db:
        marked = db.execute("SELECT text FROM instances ORDER BY margin LIMIT 1").fetchone()[0]
    good = write_jsonl(tmp_path / "good.jsonl", [{"text": marked, "label": "PER"}])
    done = run_kiwb("labels", "import", project, good, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "imported 1 labels" in done.stdout and "match no text" not in done.stdout
    listed = json.loads(run_kiwb("labels", "list", project, "--json", cwd=tmp_path).stdout)
    assert [(row["text"], row["label"]) for row in listed] == [(marked, "PER")]
    moved = marked.replace("⟦", "").replace("⟧", "") + " ⟦extra⟧"  # a span past the sentence
    for text, fragment in ((moved, "no longer matches a text"),
                           (marked.replace("⟧", ""), "marks no span")):
        bad = write_jsonl(tmp_path / "bad.jsonl", [{"text": text, "label": "PER"}])
        assert_refused(run_kiwb("labels", "import", project, bad, cwd=tmp_path), fragment)
    listed = json.loads(run_kiwb("labels", "list", project, "--json", cwd=tmp_path).stdout)
    assert len(listed) == 1  # nothing of a refused file was written


def test_two_cpu_ranks_score_a_token_project_as_one_process_does(ner_root, tmp_path):
    import numpy as np

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    def arrays_of(project: Path) -> dict:
        with Store(ProjectPaths(project).store) as store:
            rows = store.connection.execute(
                "SELECT score_key, shard FROM score_shards WHERE status = 'done'").fetchall()
        found = {}
        for key, shard in rows:
            with np.load(ProjectPaths(project).shard_file(key, shard)) as data:
                found[(key, shard)] = {name: data[name] for name in data.files}
        return found

    one = write_ner_project(tmp_path / "one", ner_root)
    two = write_ner_project(tmp_path / "two", ner_root)
    assert run_kiwb("score", one, "--foreground", cwd=tmp_path).returncode == 0
    done = run_kiwb("score", two, "--devices", "cpu,cpu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    mine, theirs = arrays_of(two), arrays_of(one)
    assert mine.keys() == theirs.keys() and len(mine) == 2 * (3 + 1)  # 160 + 48 texts, 64 a shard
    for place, arrays in theirs.items():
        for name, values in arrays.items():
            assert np.array_equal(mine[place][name], values), (place, name)


def test_two_cpu_ranks_train_a_token_student_to_the_weights_one_process_does(ner_root, tmp_path):
    """Data-parallel training through the token kind's runtime: the same global batch on two
    gloo ranks gives one process's weights (a dropout-free student, so only summation order
    differs)."""
    import torch
    from test_distributed_training import assert_close, weights
    from transformers import BertForTokenClassification

    base = tmp_path / "base"
    torch.manual_seed(0)
    tokenizer = ner_wordpiece_tokenizer()
    BertForTokenClassification(tiny_bert_config(
        ("x", "y"), len(tokenizer), hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)).save_pretrained(base)
    tokenizer.save_pretrained(base)
    project = write_ner_project(tmp_path / "proj", ner_root)
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace(str(ner_root / "base"), str(base)))
    assert run_kiwb("score", project, "--foreground", cwd=tmp_path).returncode == 0
    one = run_kiwb("train", project, "--run", "one", "--epochs", "2", "--device", "cpu",
                   "--foreground", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    two = run_kiwb("train", project, "--run", "two", "--epochs", "2", "--devices", "cpu,cpu",
                   cwd=tmp_path)
    assert two.returncode == 0, two.stderr
    assert "on 2 ranks (cpu, cpu)" in " ".join((two.stdout + two.stderr).split())
    assert_close(weights(project, "two"), weights(project, "one"))
    best = read_best(project / "runs" / "two")
    assert best["step"] == 20 and "f1" in best["metrics"]["entity"]  # rank 0 evaluated it
    assert best["metrics"]["metric"] == "entity F1"  # what its "accuracy" holds, named
