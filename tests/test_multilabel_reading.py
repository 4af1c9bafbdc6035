"""The multi-label kind's reading side: how a checkpoint is recognised and read, scoring per
text and label on a tiny real sigmoid model, and data with a list of labels per text."""

from __future__ import annotations

import math

import pytest
import torch
from tiny import make_texts, tiny_bert_config, wordpiece_tokenizer, write_jsonl

from kiwb.errors import DataError
from kiwb.kinds.multilabel import KIND as MULTI_LABEL
from kiwb.kinds.multilabel.data import check_known_labels, load_label_set_table, load_role_table
from kiwb.kinds.multilabel.scoring import label_batch_scores
from kiwb.kinds.multilabel.uncertainty import binary_entropy, mc_label_confidence
from kiwb.workers.shard_scoring import ScoringSettings, score_texts

LABELS = ("sports", "politics", "music")


def test_the_kind_is_read_from_problem_type_and_takes_one_label_or_more():
    architectures = ["BertForSequenceClassification"]
    assert MULTI_LABEL.checkpoints.matches(architectures, "multi_label_classification") == architectures[0]
    assert MULTI_LABEL.checkpoints.matches(architectures, None) is None
    assert MULTI_LABEL.checkpoints.matches(["BertForTokenClassification"], "multi_label_classification") is None
    assert MULTI_LABEL.checkpoints.read_teacher(["toxic"]).classes == ("toxic",)
    assert MULTI_LABEL.checkpoints.read_teacher(["LABEL_0", "LABEL_1"], ["a", "b"]).outputs == ("a", "b")
    with pytest.raises(ValueError, match=r"generically \(LABEL_0\)"):
        MULTI_LABEL.checkpoints.read_teacher(["LABEL_0", "toxic"])
    assert MULTI_LABEL.checkpoints.union([["a", "b", "c"], ["c", "d"]]) == ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def sigmoid_model():
    from transformers import BertForSequenceClassification

    tokenizer = wordpiece_tokenizer(None)
    torch.manual_seed(0)
    config = tiny_bert_config(LABELS, len(tokenizer), problem_type="multi_label_classification")
    return BertForSequenceClassification(config).eval(), tokenizer


def test_scoring_gives_each_label_its_own_probability_and_uncertainty(sigmoid_model):
    model, tokenizer = sigmoid_model
    texts = [row["text"] for row in make_texts(10, seed=5)]
    settings = ScoringSettings(passes=6, batch_size=4, max_length=64, strategy="loop",
                               dtype="float32", seed=0, keep_passes=True)
    cpu = torch.device("cpu")
    arrays = score_texts(model, tokenizer, texts, settings, cpu, shard_seed=3,
                         batch_scores=label_batch_scores)
    assert arrays["det_probs"].shape == arrays["mc_confidence"].shape == (10, 3)
    assert arrays["pass_probs"].shape == (10, 6, 3)
    # Dropout off: the model's own logits, each label's sigmoid (not a softmax over labels).
    with torch.no_grad():
        logits = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
    assert torch.allclose(torch.from_numpy(arrays["det_probs"]), logits.sigmoid(), atol=1e-5)
    assert not math.isclose(float(arrays["det_probs"][0].sum()), 1.0, abs_tol=1e-3)
    # The MC figures are those of the stored passes.
    passes = torch.from_numpy(arrays["pass_probs"]).transpose(0, 1)  # (K, n, L)
    assert torch.allclose(torch.from_numpy(arrays["mc_probs"]), passes.mean(0), atol=1e-6)
    assert torch.allclose(torch.from_numpy(arrays["mc_confidence"]), mc_label_confidence(passes),
                          atol=1e-6)
    assert torch.allclose(torch.from_numpy(arrays["mc_entropy"]),
                          binary_entropy(passes.mean(0)), atol=1e-6)
    # Reading and batching are the single-label path's: the same logits with dropout off.
    softmax_arrays = score_texts(model, tokenizer, texts, settings, cpu, shard_seed=3)
    assert (softmax_arrays["det_logits"] == arrays["det_logits"]).all()
    # A shard's draws depend on its seed only.
    again = score_texts(model, tokenizer, texts, settings, cpu, shard_seed=3,
                        batch_scores=label_batch_scores)
    assert (again["mc_probs"] == arrays["mc_probs"]).all()


def test_label_lists_from_jsonl_and_separated_strings_from_csv(tmp_path):
    rows = [{"text": "a", "labels": ["sports", "music"]}, {"text": "b", "labels": []},
            {"text": "c", "labels": ["politics", "politics"]}]
    table = load_label_set_table(str(write_jsonl(tmp_path / "d.jsonl", rows)),
                                 label_column="labels")
    assert table.label_sets == [("sports", "music"), (), ("politics",)]
    csv = tmp_path / "d.csv"
    csv.write_text('text,labels\na,sports;music\nb,""\nc, politics \n', encoding="utf-8")
    table = load_label_set_table(str(csv), label_column="labels", label_separator=";")
    assert table.label_sets == [("sports", "music"), (), ("politics",)]
    assert table.texts == ["a", "b", "c"] and table.labels is None


@pytest.mark.parametrize(("value", "separator", "message"), [
    ("sports;music", None, r"line 1 of column 'labels' is 'sports;music', a string.*set "
                           r"label_separator"),
    (3, None, r"line 1 of column 'labels' is 3, not a list of label names"),
    (["sports", ""], None, r"line 1 of column 'labels' has an empty label name"),
])
def test_bad_label_columns_are_refused_in_one_line(tmp_path, value, separator, message):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "a", "labels": value}])
    with pytest.raises(DataError, match=message) as refused:
        load_label_set_table(str(path), label_column="labels", label_separator=separator)
    assert "\n" not in str(refused.value) and str(path) in str(refused.value)


def test_an_eval_set_needs_labels_and_only_labels_a_teacher_knows(tmp_path):
    from kiwb.project.config_schema import DatasetConfig

    path = write_jsonl(tmp_path / "e.jsonl", [{"text": "a", "labels": ["sports", "jazz"]}])
    with pytest.raises(DataError, match=r"\[data.eval\] .* set label_column"):
        load_role_table(str(path), DatasetConfig(path=str(path)), "eval")
    table = load_role_table(str(path), DatasetConfig(path=str(path), label_column="labels"), "eval")
    with pytest.raises(DataError, match=r"line 1 of column 'labels' has label 'jazz', which no "
                                        r"teacher knows \(sports, music\)"):
        check_known_labels(table, ["sports", "music"], "labels")
