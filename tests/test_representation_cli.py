"""Teachers' representations end to end: what scoring keeps (the classifier head's input), the
representation routings on tiny real teachers, a project scored before kiwb kept them, and a
teacher's seen texts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_helpers import run_kiwb, write_project
from tiny import TEACHER_A_LABELS, TEACHER_B_LABELS, build_teacher, make_texts, write_jsonl

from kiwb.workers.representation_sets import represent_texts
from kiwb.workers.shard_scoring import ScoringSettings, score_texts

TEXTS = [row["text"] for row in make_texts(12, seed=5)]


def settings(**extra) -> ScoringSettings:
    return ScoringSettings(passes=2, batch_size=5, max_length=32, strategy="loop",
                           dtype="float32", seed=0, **extra)


def load(folder: Path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    return (AutoModelForSequenceClassification.from_pretrained(folder).eval(),
            AutoTokenizer.from_pretrained(folder))


def head_input_by_hand(model, tokenizer, texts: list[str]) -> torch.Tensor:
    """The classifier's input, rebuilt from a second forward's last hidden states."""
    batch = tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch, output_hidden_states=True).hidden_states[-1]
        if model.config.model_type == "bert":   # the pooler: tanh(dense([CLS]))
            return model.bert.pooler(hidden)
        head = model.classifier                   # RoBERTa: tanh(dense(<s>)), then out_proj
        return torch.tanh(head.dense(hidden[:, 0]))


@pytest.mark.parametrize("teacher", ["teacher_a", "teacher_b"])  # BERT-like, RoBERTa-like
def test_the_stored_representation_is_the_classifier_heads_input(teachers_dir, teacher):
    model, tokenizer = load(teachers_dir / teacher)
    expected = head_input_by_hand(model, tokenizer, TEXTS)
    device = torch.device("cpu")
    scored = score_texts(model, tokenizer, TEXTS, settings(representation="head"), device, shard_seed=0)
    alone = represent_texts(model, tokenizer, TEXTS, settings(), device, "head")
    for found in (scored["representation"], alone["representation"]):
        assert found.dtype == np.float16 and found.shape == tuple(expected.shape)
        assert np.allclose(found.astype(np.float32), expected.numpy(), atol=2e-3)
    # the MC passes ran in training mode and were not kept: the scores are those without it
    plain = score_texts(model, tokenizer, TEXTS, settings(), device, shard_seed=0)
    assert set(scored) - set(plain) == {"representation"}
    assert all(np.array_equal(scored[name], plain[name]) for name in plain)
    assert alone["predicted"].tolist() == plain["det_logits"].argmax(1).tolist()


def test_mean_representation_is_the_mean_of_the_last_hidden_states(teachers_dir):
    model, tokenizer = load(teachers_dir / "teacher_a")
    found = represent_texts(model, tokenizer, TEXTS[:1], settings(), torch.device("cpu"), "mean")
    batch = tokenizer(TEXTS[:1], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch, output_hidden_states=True).hidden_states[-1][0]
    assert np.allclose(found["representation"][0].astype(np.float32), hidden.mean(0).numpy(), atol=2e-3)


@pytest.mark.parametrize("teacher", ["teacher_a", "teacher_b"])  # BERT-like, RoBERTa-like
def test_cls_representation_is_the_first_tokens_last_hidden_state(teachers_dir, teacher):
    model, tokenizer = load(teachers_dir / teacher)
    found = represent_texts(model, tokenizer, TEXTS, settings(), torch.device("cpu"), "cls")
    with torch.no_grad():  # one text at a time: no padding to differ by
        first = torch.stack([model(**tokenizer(text, truncation=True, max_length=32,
                                               return_tensors="pt"),
                                   output_hidden_states=True).hidden_states[-1][0, 0]
                             for text in TEXTS])
    assert np.allclose(found["representation"].astype(np.float32), first.numpy(), atol=2e-3)
    # before BERT's pooler: not the head's input
    assert not np.allclose(found["representation"].astype(np.float32),
                           head_input_by_hand(model, tokenizer, TEXTS).numpy(), atol=2e-3)


@pytest.mark.parametrize("side", ["right", "left"])
def test_a_decoder_classifiers_representation_is_its_last_real_token(tmp_path, side):
    from tiny import bpe_tokenizer
    from transformers import LlamaConfig, LlamaForSequenceClassification

    tokenizer = bpe_tokenizer(tmp_path)
    tokenizer.padding_side = side
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, num_labels=3,
        pad_token_id=tokenizer.pad_token_id)).eval()
    found = represent_texts(model, tokenizer, TEXTS[:6], settings(), torch.device("cpu"), "head")
    for row, text in enumerate(TEXTS[:6]):  # alone, unpadded: its last token is its last
        with torch.no_grad():
            alone = tokenizer([text], truncation=True, max_length=32, return_tensors="pt")
            hidden = model(**alone, output_hidden_states=True).hidden_states[-1][0, -1]
        assert np.allclose(found["representation"][row].astype(np.float32), hidden.numpy(), atol=2e-3)


# -- the routings end to end --------------------------------------------------------------


@pytest.fixture(scope="module")
def unexposed(tmp_path_factory) -> Path:
    """Two tiny teachers that, like real ones, never saw a text of the other's labels (no
    outlier exposure), and teacher a again with its logits x 3 (over-confident); a pool, an
    eval set and teacher a's training texts."""
    root = tmp_path_factory.mktemp("unexposed")
    build_teacher(root / "a", "bert", TEACHER_A_LABELS, seed=1, topics=TEACHER_A_LABELS)
    build_teacher(root / "b", "roberta", TEACHER_B_LABELS, seed=2, topics=TEACHER_B_LABELS)
    shutil.copytree(root / "a", root / "a-sharp")
    model, _ = load(root / "a-sharp")
    with torch.no_grad():
        model.classifier.weight.mul_(3.0)
        model.classifier.bias.mul_(3.0)
    model.save_pretrained(root / "a-sharp")
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(160, seed=21)])
    write_jsonl(root / "eval.jsonl", make_texts(40, seed=22))
    write_jsonl(root / "a-seen.jsonl", make_texts(60, seed=2, labels=TEACHER_A_LABELS))
    return root


def integrated(project: Path, routing: str) -> dict:
    return json.loads(run_kiwb("integrate", project, "--routing", routing, "--json",
                               cwd=project).stdout)


@pytest.mark.slow
def test_representation_routing_holds_where_an_over_confident_teacher_takes_confidence(unexposed):
    found = {}
    for teacher in ("a", "a-sharp"):
        project = write_project(unexposed / f"proj-{teacher}", {"a": unexposed / teacher,
                                                                 "b": unexposed / "b"},
                                unexposed / "pool.jsonl", unexposed / "eval.jsonl")
        run_kiwb("score", project, cwd=unexposed)
        for routing in ("confidence", "mahalanobis", "knn"):
            summary = integrated(project, routing)
            found[teacher, routing] = (summary["eval"]["routing_accuracy"]["chosen"], summary["wins"])
    # Measured: confidence routes 55% of the eval texts right (50% over-confident, where
    # teacher a wins 159 of the 160 pool texts); mahalanobis 100%, knn 95%, both unchanged.
    assert found["a-sharp", "confidence"][0] <= 0.6 and found["a-sharp", "confidence"][1]["a"] >= 150
    assert found["a-sharp", "mahalanobis"][0] >= 0.95 and found["a-sharp", "knn"][0] >= 0.85
    for routing in ("mahalanobis", "knn"):  # a temperature changes neither seeds nor distances
        assert found["a", routing] == found["a-sharp", routing]


@pytest.mark.slow
def test_scores_made_without_representations_get_them_from_one_forward(unexposed):
    project = write_project(unexposed / "proj-old", {"a": unexposed / "a", "b": unexposed / "b"},
                            unexposed / "pool.jsonl", unexposed / "eval.jsonl",
                            scoring='mc_passes = 4\nshard_size = 64\nrepresentation = "none"\n')
    run_kiwb("score", project, cwd=unexposed)
    shards = {path: path.read_bytes() for path in (project / "scores").glob("*/*.npz")}
    assert len(shards) == 2 * (3 + 1)  # two teachers x (3 pool shards + 1 eval shard)
    refused = run_kiwb("integrate", project, "--routing", "mahalanobis", cwd=project, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert 'representation = "none" does not keep: set it to "head"' in refused.stderr

    config = project / "kiwb.toml"
    # a routing that does not read them: the project is not made to draw them
    config.write_text(config.read_text().replace('representation = "none"', "")
                      + '[integration]\nrouting = "rank"\n')
    refused = run_kiwb("integrate", project, "--routing", "mahalanobis", cwd=project, check=False)
    assert refused.returncode != 0 and f"run kiwb score {project} --representations" in refused.stderr
    assert "one dropout-off forward per text, the MC scores kept" in refused.stderr
    untouched = run_kiwb("score", project, cwd=project)
    assert "nothing to do." in untouched.stdout + untouched.stderr
    # "auto" (the default) measures the routings that read them, so it has them drawn: here
    # asked for by the flag, as a project with routing = "rank" asks
    done = run_kiwb("score", project, "--representations", cwd=project)
    said = done.stdout + done.stderr  # the worker's lines go to stderr
    assert "Keeping the teachers' representations of 400 text×teacher pairs" in said
    assert "MC-dropout passes each" not in said  # nothing was scored again
    assert all(path.read_bytes() == data for path, data in shards.items())  # MC scores untouched
    added = sorted(set((project / "scores").glob("*/*.npz")) - set(shards))
    assert len(added) == 8
    with np.load(added[0]) as data:
        # the representation, and the rows it holds (checked when read: kiwb.project.shard_files)
        assert data.files == ["representation", "rows"] and data["representation"].dtype == np.float16
    # at most 2 bytes x width and an 8-byte row number per text and teacher, and a few hundred
    # bytes of file header per array
    width = 32
    stored = sum(path.stat().st_size for path in added)
    assert stored <= (160 + 40) * 2 * (2 * width + 8) + 8 * 700
    summary = integrated(project, "mahalanobis")
    assert summary["eval"]["routing_accuracy"]["chosen"] >= 0.95
    again = run_kiwb("score", project, "--representations", cwd=project)
    assert "nothing to do." in again.stdout + again.stderr


@pytest.mark.slow
def test_seen_texts_fit_the_teachers_class_means(unexposed):
    project = write_project(unexposed / "proj-seen", {"a": unexposed / "a", "b": unexposed / "b"},
                            unexposed / "pool.jsonl", unexposed / "eval.jsonl")
    config = project / "kiwb.toml"
    text = config.read_text()
    config.write_text(text.replace(f'path = "{unexposed / "a"}"',
                                   f'path = "{unexposed / "a"}"\nseen = "{unexposed / "a-seen.jsonl"}"'))
    done = run_kiwb("score", project, cwd=project)
    assert "a · seen (representation)" in done.stdout + done.stderr
    summary = integrated(project, "mahalanobis")
    teachers = {each["name"]: each["routing"] for each in summary["per_teacher"]}
    assert teachers["a"]["reference"] == "seen: 60 of its training texts"
    assert teachers["b"]["reference"].startswith("seeded, then refitted on the")
    assert summary["eval"]["routing_accuracy"]["chosen"] >= 0.95
    shown = run_kiwb("integrate", project, "--routing", "mahalanobis", cwd=project).stdout
    assert "reference" in shown and "seen: 60 of its" in " ".join(shown.split())

    # a column the file lacks, and labels that are not the teacher's: one line each
    write_jsonl(unexposed / "bad-seen.jsonl", [{"sentence": "x", "label": "sports"}])
    config.write_text(text.replace(f'path = "{unexposed / "a"}"',
                                   f'path = "{unexposed / "a"}"\nseen = "{unexposed / "bad-seen.jsonl"}"'))
    refused = run_kiwb("score", project, cwd=project, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "no column 'text'" in refused.stderr and "set seen_text_column in teachers[1]" in refused.stderr
    write_jsonl(unexposed / "bad-seen.jsonl", [{"text": "x", "label": "music"}])
    refused = run_kiwb("score", project, cwd=project, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "labels 'music' of column 'label' are not among the labels of teacher 'a'" in refused.stderr


@pytest.mark.slow
def test_a_student_of_a_representation_routing_names_its_reference_in_the_model_card(
        unexposed, student_base):
    from conftest import TRAINING_SETTINGS

    project = write_project(unexposed / "proj-card", {"a": unexposed / "a", "b": unexposed / "b"},
                            unexposed / "pool.jsonl", unexposed / "eval.jsonl",
                            extra=f'{TRAINING_SETTINGS}student = "{student_base}"\n'
                            '[integration]\nrouting = "mahalanobis"\n')
    run_kiwb("score", project, cwd=project)
    run_kiwb("train", project, "--epochs", "1", "--foreground", cwd=project)
    manifest = json.loads((project / "runs" / "muki-hard-mahalanobis" / "manifest.json").read_text())
    references = manifest["representations"]["references"]
    assert set(references) == {"a", "b"} and references["a"].startswith("seeded, then refitted")
    run_kiwb("export", project, "--run", "muki-hard-mahalanobis", "--to", project / "export",
             cwd=project)
    card = (project / "export" / "README.md").read_text()
    assert "- routing: `mahalanobis`" in card
    assert "routing reference (from each teacher's representation): a: seeded, then refitted" in card
    # the conflicts list ranks by the routing's own margin: the top two quantiles' gap
    from kiwb.project.queries import latest_integration
    from kiwb.project.store import Store

    summary = integrated(project, "mahalanobis")
    with Store(project / "store.sqlite") as store:
        key = latest_integration(store).key
        rows = store.connection.execute(
            "SELECT margin, confidences FROM instances WHERE integration = ? ORDER BY margin",
            (key,)).fetchall()
    assert summary["key"] == key and len(rows) == 160
    for row in rows:
        scores = sorted(json.loads(row["confidences"]), reverse=True)
        assert row["margin"] == pytest.approx(scores[0] - scores[1], abs=1e-6)


def test_seen_labels_from_a_class_label_column_and_a_row_without_one(unexposed, tmp_path):
    import datasets

    from kiwb.project.config import load_config
    from kiwb.workers.project_inputs import inspect_teachers
    from kiwb.workers.representation_sets import read_seen

    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["politics", "sports"])})
    folder = tmp_path / "seen-a"
    datasets.Dataset.from_dict({"text": ["vote", "goal", "senate"], "label": [0, 1, 0]},
                               features=features).save_to_disk(str(folder))
    project = write_project(tmp_path / "proj", {"a": unexposed / "a", "b": unexposed / "b"},
                            unexposed / "pool.jsonl")
    config_file = project / "kiwb.toml"
    config_file.write_text(config_file.read_text().replace(
        f'path = "{unexposed / "a"}"', f'path = "{unexposed / "a"}"\nseen = "{folder}"'))
    config = load_config(project)
    teacher = inspect_teachers(config)[0]
    seen = read_seen(config, config.teachers[0], teacher, 1)
    # the ClassLabel ids name the classes; their order is the teacher's (sports, politics)
    assert seen.table.texts == ["vote", "goal", "senate"]
    assert [teacher.labels[c] for c in seen.classes] == ["politics", "sports", "politics"]
    datasets.Dataset.from_dict({"text": ["vote", "goal"], "label": [0, -1]},
                               features=features).save_to_disk(str(folder))
    from kiwb.errors import DataError

    with pytest.raises(DataError, match=r"teachers\[1\]\.seen .*: row 2 of column 'label' has no "
                                        "label; give it one or remove the row"):
        read_seen(config, config.teachers[0], teacher, 1)
