"""A multi-label student's head starts at the labels' log-odds: the numbers worked out by hand,
and the output layer found in BERT and RoBERTa heads and in a student loaded from its base."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from kiwb.errors import KiwbError
from kiwb.kinds.multilabel.losses import prior_log_odds, weighted_bce_loss
from kiwb.kinds.multilabel.student import MultiLabelStudent, set_head_bias

SMALL = {"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 16, "num_labels": 3}


def test_the_prior_is_the_log_odds_of_each_label_s_mean_target():
    targets = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    # means 0.5, 0.25, 0 (kept at 0.001): log(1) = 0, log(0.25 / 0.75), log(0.001 / 0.999)
    assert prior_log_odds(targets).tolist() == pytest.approx(
        [0.0, math.log(1 / 3), math.log(0.001 / 0.999)], abs=1e-6)


def test_weights_weigh_the_mean_the_prior_is_taken_of():
    targets = torch.tensor([[0.9, 0.2], [0.1, 0.2]])
    weights = torch.tensor([[3.0, 1.0], [1.0, 0.0]])
    # label 0: (3 x 0.9 + 1 x 0.1) / 4 = 0.7; label 1: 0.2 (the second row weighs nothing)
    assert prior_log_odds(targets, weights).tolist() == pytest.approx(
        [math.log(0.7 / 0.3), math.log(0.2 / 0.8)], abs=1e-6)


def test_a_head_at_the_prior_is_where_a_head_that_sees_no_text_has_its_least_loss():
    targets = torch.tensor([[0.9, 0.0], [0.3, 1.0], [0.6, 0.0]])
    weights = torch.tensor([[1.0, 2.0], [2.0, 1.0], [1.0, 1.0]])
    bias = prior_log_odds(targets, weights).requires_grad_(True)
    weighted_bce_loss("muki-hard", bias.expand(3, 2), targets, weights).backward()
    assert bias.grad.abs().max() < 1e-6


@pytest.mark.parametrize("model", [
    BertForSequenceClassification(BertConfig(**SMALL)),  # classifier
    RobertaForSequenceClassification(RobertaConfig(**SMALL, pad_token_id=1)),  # classifier.out_proj
], ids=["bert", "roberta"])
def test_the_head_s_output_layer_starts_at_the_bias(model):
    set_head_bias(model, torch.tensor([-1.0, 0.5, 2.0]))
    last = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert last.out_features == 3 and last.bias.tolist() == [-1.0, 0.5, 2.0]


def test_a_head_without_an_output_layer_of_the_labels_is_refused_in_one_line():
    model = BertForSequenceClassification(BertConfig(**SMALL))
    model.config.num_labels = 4  # no layer gives four values
    with pytest.raises(KiwbError, match="no output layer of 4 labels"):
        set_head_bias(model, torch.zeros(4))


def test_a_student_loaded_from_its_base_starts_at_the_priors(student_base):
    bias = torch.tensor([-2.0, 0.25])
    model, _ = MultiLabelStudent(head_bias=bias).load_base(str(student_base), ["a", "b"])
    assert model.classifier.bias.tolist() == bias.tolist()
    assert model.config.problem_type == "multi_label_classification"
    untouched, _ = MultiLabelStudent().load_base(str(student_base), ["a", "b"])
    assert untouched.classifier.bias.tolist() == [0.0, 0.0]  # transformers' own start
