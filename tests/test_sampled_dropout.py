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

from kiwb.core import sampled_dropout as sampled
from kiwb.core.sampled_dropout import attention_with_dropout, drop_probability, dropout, keep_mask
from kiwb.workers.sampled_dropout import ATTENTION_NAME, numpy_lanes, sampled_dropout

CPU = torch.device("cpu")


def test_drop_probability_is_p_rounded_to_sixteen_bits():
    assert drop_probability(0.1) == 6554 / 65536  # 0.1000061
    assert drop_probability(0.5) == 0.5
    assert drop_probability(0.0) == 0.0
    assert drop_probability(1e-9) == 0.0
    assert drop_probability(1.0) == 1.0


@pytest.mark.parametrize("lanes", ["torch", "numpy"])
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_each_element_is_dropped_with_probability_p_whatever_its_lane(p, lanes):
    torch.manual_seed(0)
    source = sampled.torch_lanes if lanes == "torch" else numpy_lanes(0)
    dropped = keep_mask((1_000_000, 4), p, source) == 0  # column j: the j-th lane of a 64-bit draw
    rate = drop_probability(p)
    bound = 5 * math.sqrt(rate * (1 - rate) / 1_000_000)  # five standard errors
    for lane in range(4):
        assert abs(dropped[:, lane].float().mean().item() - rate) < bound
    # Neighbours are independent: both dropped as often as p².
    both = (dropped[:, 0] & dropped[:, 1]).float().mean().item()
    assert abs(both - rate ** 2) < 5 * math.sqrt(rate ** 2 / 1_000_000)


def test_keep_mask_reads_each_lane_against_the_threshold():
    # p = 0.25 drops the lanes below -32768 + 16384 = -16384, a quarter of the int16 range.
    lanes = torch.tensor([-32768, -16385, -16384, 0, 32767], dtype=torch.int16)
    assert keep_mask((5,), 0.25, lambda count: lanes[:count]).tolist() == [0, 0, 1, 1, 1]
    assert keep_mask((5,), 0.0, lambda count: lanes[:count]).tolist() == [1, 1, 1, 1, 1]
    assert keep_mask((5,), 1.0, lambda count: lanes[:count]).tolist() == [0, 0, 0, 0, 0]


def test_masks_repeat_under_a_seed_and_differ_without():
    source = numpy_lanes(3)
    first, second = keep_mask((64, 33), 0.2, source), keep_mask((64, 33), 0.2, source)
    assert torch.equal(keep_mask((64, 33), 0.2, numpy_lanes(3)), first)
    assert not torch.equal(first, second)
    torch.manual_seed(3)
    first = keep_mask((64, 33), 0.2)
    torch.manual_seed(3)
    assert torch.equal(keep_mask((64, 33), 0.2), first)


def test_dropout_zeroes_or_scales_by_one_over_one_minus_p():
    torch.manual_seed(0)
    x = torch.full((200, 300), 2.0)
    out = dropout(x, 0.25)  # 0.25 is a whole number of 2^-16 steps, so no rounding below
    assert set(out.unique().tolist()) == {0.0, torch.tensor(2.0 / 0.75).item()}
    assert abs(out.mean().item() - 2.0) < 0.03      # the expectation is kept
    assert torch.equal(x, torch.full((200, 300), 2.0)), "the input is left alone"
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))


class RecordingLanes:
    """A lane source that remembers what it handed out, to rebuild the masks it made."""

    def __init__(self, seed: int):
        self.source, self.drawn = numpy_lanes(seed), []

    def __call__(self, count: int) -> torch.Tensor:
        self.drawn.append(self.source(count))
        return self.drawn[-1]

    def keep(self, shape, p: float) -> torch.Tensor:
        every = torch.cat(self.drawn)
        return keep_mask(shape, p, lambda count: every[:count])


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


@pytest.mark.parametrize("shape, block", [
    ((2, 3, 5, 4), 1 << 19),  # one block
    ((5, 3, 6, 4), 3 * 36),   # a block per text
    ((2, 6, 8, 4), 2 * 64),   # blocks of two heads within a text
])
def test_attention_dropout_drops_weights_then_rescales(shape, block, monkeypatch):
    monkeypatch.setattr(sampled, "_BLOCK_ELEMENTS", block)
    batch, heads, length, dim = shape
    generator = torch.Generator().manual_seed(7)
    query, key, value = (torch.randn(*shape, generator=generator) for _ in range(3))
    keep = torch.ones(batch, 1, length, length, dtype=torch.bool)
    keep[1, :, :, length - 2:] = False  # the second text's last two tokens are padding
    lanes = RecordingLanes(11)
    ours = attention_with_dropout(query, key, value, keep, None, 0.3, lanes)
    # Whatever the blocks, the lanes were drawn in the weights' row-major order.
    dropped = lanes.keep((batch, heads, length, length), 0.3) == 0
    scores = (query @ key.transpose(-1, -2) / 2.0).masked_fill(~keep, float("-inf"))  # 1/sqrt(4)
    weights = scores.softmax(-1)
    expected = ((weights.masked_fill(dropped, 0.0) / (1 - drop_probability(0.3))) @ value).transpose(1, 2)
    torch.testing.assert_close(ours, expected)
    assert 0.2 < dropped.float().mean() < 0.4


def test_attention_blocks_without_dropout_equal_sdpa(monkeypatch):
    monkeypatch.setattr(sampled, "_BLOCK_ELEMENTS", 2 * 49)  # two heads of 7 x 7 per block
    query, key, value = _qkv(batch=3, heads=5, length=7)
    additive = torch.zeros(3, 1, 1, 7)
    additive[2, ..., 5:] = torch.finfo(torch.float32).min
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=additive).transpose(1, 2)
    torch.testing.assert_close(attention_with_dropout(query, key, value, additive, None, 0.0), expected)


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
        with sampled_dropout(model, CPU, seed=0):
            model.train()
            assert ALL_ATTENTION_FUNCTIONS.get_interface(model.config._attn_implementation, None) \
                is ALL_ATTENTION_FUNCTIONS[ATTENTION_NAME]
            sampled = model(**inputs).logits
    torch.testing.assert_close(sampled, expected, rtol=1e-5, atol=1e-5)


def test_samples_vary_repeat_under_a_seed_and_the_model_is_put_back():
    model, inputs = _tiny("bert", 0.2), _inputs()
    dropouts = [module for module in model.modules() if isinstance(module, torch.nn.Dropout)]
    with torch.no_grad():
        model.train()
        with sampled_dropout(model, CPU, seed=5):
            first, second = model(**inputs).logits, model(**inputs).logits
        with sampled_dropout(model, CPU, seed=5):
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
    with torch.no_grad(), sampled_dropout(model, CPU, seed=0):
        model.train()
        assert not torch.allclose(model(**inputs).logits, model(**inputs).logits)


def test_nothing_changes_off_cpu():
    model = _tiny("bert", 0.2)
    with sampled_dropout(model, torch.device("meta"), seed=0):
        assert model.config._attn_implementation == "sdpa"
        assert all("forward" not in vars(module) for module in model.modules())
