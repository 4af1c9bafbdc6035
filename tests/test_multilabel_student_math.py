"""The multi-label student's losses and thresholds against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from kiwb.kinds.multilabel.losses import gold_bce_loss, weighted_bce_loss
from kiwb.kinds.multilabel.thresholds import decide, tune_thresholds


def test_weighted_bce_by_hand():
    logits = torch.tensor([[0.0, 0.0]])
    # sigmoid(0) = 0.5: BCE is log 2 whatever the target; weights 1 and 0 halve the mean.
    assert weighted_bce_loss("ant", logits, torch.tensor([[1.0, 0.3]]), None).item() == (
        pytest.approx(math.log(2)))
    assert weighted_bce_loss("muki-hard", logits, torch.tensor([[1.0, 0.3]]),
                             torch.tensor([[1.0, 0.0]])).item() == pytest.approx(math.log(2) / 2)
    # logit log 3: p = 0.75; target 0.5: -(0.5 log 0.75 + 0.5 log 0.25)
    expected = -(0.5 * math.log(0.75) + 0.5 * math.log(0.25))
    assert weighted_bce_loss("mean", torch.tensor([[math.log(3)]]), torch.tensor([[0.5]]),
                             None).item() == pytest.approx(expected)
    assert gold_bce_loss(torch.tensor([[math.log(3)]]), torch.tensor([[1]])).item() == (
        pytest.approx(-math.log(0.75)))


def test_thresholds_are_tuned_per_label_and_default_to_a_half():
    # every label can reach F1 1 here, so the micro F1 of all is 1 with each label's best
    probs = torch.tensor([[0.30, 0.9, 0.2], [0.35, 0.6, 0.1], [0.10, 0.7, 0.3], [0.05, 0.2, 0.4]])
    gold = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]])
    thresholds = tune_thresholds(probs, gold)
    # Label 0: its positives sit at 0.30 and 0.35, the negatives at or below 0.10: any threshold
    # in [0.10, 0.30) gives F1 1, and 0.25 is the candidate nearest 0.5.
    # Label 1: positives 0.9 and 0.7, a negative at 0.6: thresholds in [0.6, 0.7) give F1 1;
    # 0.6 is the candidate nearest 0.5 (0.6 itself: 0.6 > 0.6 is false).
    # Label 2: no positive on dev, so 0.5.
    assert thresholds.tolist() == pytest.approx([0.25, 0.6, 0.5])
    assert decide(probs, thresholds).tolist() == [[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]]
    assert decide(probs).tolist() == [[0, 1, 0], [0, 1, 0], [0, 1, 0], [0, 0, 0]]


def test_thresholds_are_tuned_for_the_micro_f1_of_all_labels_together():
    probs = torch.tensor([[0.9, 0.2], [0.8, 0.1], [0.1, 0.3], [0.2, 0.1]])
    gold = torch.tensor([[1, 0], [1, 1], [0, 0], [0, 0]])
    # Label 1 is not learned: its one positive has the lowest probability. Alone, its F1 is
    # highest at 0.05 (yes to all four texts: 2 x 1 / (2 x 1 + 3) = 0.4, against 0 above), but
    # with label 0's two true positives that makes micro F1 2 x 3 / (2 x 3 + 3) = 0.67, where
    # saying no to it keeps 2 x 2 / (2 x 2 + 1) = 0.8 (any threshold from 0.3: 0.5 is nearest).
    # Label 0 is perfect for any threshold in [0.2, 0.8): 0.5.
    assert tune_thresholds(probs, gold).tolist() == pytest.approx([0.5, 0.5])


def test_the_student_head_losses_and_metrics_on_a_tiny_model(tmp_path):
    from types import SimpleNamespace

    from tiny import make_texts, tiny_bert_config, wordpiece_tokenizer
    from transformers import BertForSequenceClassification

    from kiwb.kinds.multilabel.metrics import multilabel_report
    from kiwb.kinds.multilabel.student import MultiLabelStudent, multi_hot, predict_probs
    from kiwb.kinds.multilabel.thresholds import tune_thresholds
    from kiwb.workers.student import tokenize

    labels = ["sports", "politics", "music"]
    base = tmp_path / "base"
    tokenizer = wordpiece_tokenizer(base)
    torch.manual_seed(0)
    BertForSequenceClassification(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(base)
    tokenizer.save_pretrained(base)
    student = MultiLabelStudent()
    model, tokenizer = student.load_base(str(base), labels)
    assert model.config.problem_type == "multi_label_classification"
    assert model.config.num_labels == 3
    texts = [row["text"] for row in make_texts(6, seed=4)]
    gold = multi_hot([("sports",), ("politics", "music"), (), ("music",), ("sports",), ()], labels)
    assert gold.tolist()[1] == [0.0, 1.0, 1.0]
    features = tokenize(tokenizer, texts, 64)
    cpu = torch.device("cpu")
    data = SimpleNamespace(eval_ids=gold, labels=labels)
    report = student.evaluate(model, tokenizer, features, data, 4, cpu, "float32")
    probs = predict_probs(model, tokenizer, features, 4, cpu)
    expected = multilabel_report(gold, (probs > 0.5).long(), labels)
    assert (report["accuracy"], report["macro_f1"]) == (expected["micro_f1"], expected["macro_f1"])
    assert report["per_class_accuracy"] == expected["per_label_f1"]
    details = report["details"]
    assert {name: details[name] for name in ("hamming_loss", "subset_accuracy", "support")} == {
        name: expected[name] for name in ("hamming_loss", "subset_accuracy", "support")}
    assert report["predicted_counts"] == (probs > 0.5).sum(0).tolist()
    # Per-label thresholds tuned on these labeled texts, saved in the model's config so the
    # checkpoint and its export decide with them.
    assert model.config.label_thresholds == details["thresholds"]
    assert list(details["thresholds"].values()) == tune_thresholds(probs, gold).tolist()
    # The losses the Trainer takes from the student: BCE per label, not a softmax's.
    logits = student.logits(model, tokenizer, features, torch.arange(6), cpu)
    assert torch.isclose(student.supervised_loss(logits, gold),
                         torch.nn.functional.binary_cross_entropy_with_logits(logits, gold))
    assert student.predicted_counts(model, tokenizer, features, 4, cpu, "float32", 3) == (
        (probs > 0.5).sum(0).tolist())
