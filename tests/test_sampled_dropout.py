"""kiwb's 16-bit CPU dropout: the same Bernoulli law as torch's, the same attention maths, and
a teacher that samples through it and is put back afterwards."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tiny import tiny_bert_config
from transformers import (
    BertForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from kiwb.core.sampled_dropout import attention_with_dropout, drop_mask, drop_probability, dropout
from kiwb.workers.sampled_dropout import ATTENTION_NAME, sampled_dropout

CPU = torch.device("cpu")


def test_drop_probability_is_p_rounded_to_sixteen_bits():
    assert drop_probability(0.1) == 6554 / 65536  # 0.1000061
    assert drop_probability(0.5) == 0.5
    assert drop_probability(0.0) == 0.0


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_each_element_is_dropped_with_probability_p_whatever_its_lane(p):
    torch.manual_seed(0)
    mask = drop_mask((1_000_000, 4), p)  # column j: the j-th 16-bit lane of each 64-bit draw
    rate = drop_probability(p)
    bound = 5 * math.sqrt(rate * (1 - rate) / 1_000_000)  # five standard errors
    for lane in range(4):
        assert abs(mask[:, lane].float().mean().item() - rate) < bound
    # Neighbours are independent: both dropped as often as p².
    both = (mask[:, 0] & mask[:, 1]).float().mean().item()
    assert abs(both - rate ** 2) < 5 * math.sqrt(rate ** 2 / 1_000_000)


def test_masks_repeat_under_a_seed_and_differ_without():
    torch.manual_seed(3)
    first, second = drop_mask((64, 33), 0.2), drop_mask((64, 33), 0.2)
    torch.manual_seed(3)
    assert torch.equal(drop_mask((64, 33), 0.2), first)
    assert not torch.equal(first, second)


def test_dropout_zeroes_or_scales_by_one_over_one_minus_p():
    torch.manual_seed(0)
    x = torch.full((200, 300), 2.0)
    out = dropout(x, 0.2)
    assert set(out.unique().tolist()) == {0.0, 2.5}  # 2 / (1 - 0.2)
    assert abs(out.mean().item() - 2.0) < 0.02      # the expectation is kept
    assert torch.equal(x, torch.full((200, 300), 2.0)), "the input is left alone"
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))


def _qkv(batch=2, heads=3, length=5, dim=4):
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(batch, heads, length, dim, generator=generator) for _ in range(3)]


@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
def test_attention_without_dropout_equals_sdpa(mask_kind):
    query, key, value = _qkv()
    keep = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    keep[1, :, :, 3:] = False  # the second text's last two tokens are padding
    mask = {"none": None, "bool": keep,
            "additive": torch.zeros(2, 1, 5, 5).masked_fill(~keep, torch.finfo(torch.float32).min)}[mask_kind]
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask).transpose(1, 2)
    ours = attention_with_dropout(query, key, value, mask, None, 0.0)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(attention_with_dropout(query, key, value, mask, 0.25, 0.0),
                               F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                                              scale=0.25).transpose(1, 2))


def test_attention_dropout_drops_weights_then_rescales():
    query, key, value = _qkv()
    torch.manual_seed(11)
    dropped = drop_mask((2, 3, 5, 5), 0.3)  # the draw attention_with_dropout will make
    weights = (query @ key.transpose(-1, -2) / 2.0).softmax(-1)  # 1/sqrt(4) = 1/2
    expected = ((weights.masked_fill(dropped, 0.0) / 0.7) @ value).transpose(1, 2)
    torch.manual_seed(11)
    torch.testing.assert_close(attention_with_dropout(query, key, value, None, None, 0.3), expected)


def _tiny(kind: str, dropout_p: float):
    torch.manual_seed(0)
    labels = ("x", "y", "z")
    if kind == "bert":
        config = tiny_bert_config(labels, vocab_size=50, hidden_dropout_prob=dropout_p,
                                  attention_probs_dropout_prob=dropout_p)
        return BertForSequenceClassification(config).eval()
    config = RobertaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=72, pad_token_id=1,
                           hidden_dropout_prob=dropout_p, attention_probs_dropout_prob=dropout_p,
                           id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    return RobertaForSequenceClassification(config).eval()


def _inputs():
    ids = torch.randint(5, 50, (3, 9), generator=torch.Generator().manual_seed(1))
    attention = torch.ones_like(ids)
    attention[2, 6:] = 0  # padding: the mask reaches the attention function
    return {"input_ids": ids, "attention_mask": attention}


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_a_teacher_sampling_through_it_computes_what_it_computes_in_eval(kind):
    # A drop probability too small to ever drop a weight (it rounds to 0 in 16 bits) still
    # sends every forward through kiwb's path: with nothing dropped it must equal eval.
    model, inputs = _tiny(kind, 1e-9), _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
        with sampled_dropout(model, CPU):
            model.train()
            assert ALL_ATTENTION_FUNCTIONS.get_interface(model.config._attn_implementation, None) \
                is ALL_ATTENTION_FUNCTIONS[ATTENTION_NAME]
            sampled = model(**inputs).logits
    torch.testing.assert_close(sampled, expected, rtol=1e-5, atol=1e-5)


def test_samples_vary_repeat_under_a_seed_and_the_model_is_put_back():
    model, inputs = _tiny("bert", 0.2), _inputs()
    dropouts = [module for module in model.modules() if isinstance(module, torch.nn.Dropout)]
    with torch.no_grad(), sampled_dropout(model, CPU):
        model.train()
        torch.manual_seed(5)
        first, second = model(**inputs).logits, model(**inputs).logits
        torch.manual_seed(5)
        again = model(**inputs).logits
        model.eval()
        eval_inside = model(**inputs).logits
    assert not torch.allclose(first, second)
    assert torch.equal(first, again)
    assert model.config._attn_implementation == "sdpa"
    assert all("forward" not in vars(module) for module in dropouts)
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, eval_inside, rtol=0, atol=0)


def test_attention_dropout_alone_is_sampled():
    torch.manual_seed(0)
    config = tiny_bert_config(("x", "y", "z"), vocab_size=50, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.3)
    model, inputs = BertForSequenceClassification(config), _inputs()
    with torch.no_grad(), sampled_dropout(model, CPU):
        model.train()
        assert not torch.allclose(model(**inputs).logits, model(**inputs).logits)


def test_nothing_changes_off_cpu():
    model = _tiny("bert", 0.2)
    with sampled_dropout(model, torch.device("meta")):
        assert model.config._attn_implementation == "sdpa"
        assert all("forward" not in vars(module) for module in model.modules())
