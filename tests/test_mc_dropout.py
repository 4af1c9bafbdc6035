"""MC-dropout sampling on a tiny real BERT: stochastic passes differ, the model is restored."""

from __future__ import annotations

import pytest
import torch
from tiny import tiny_bert_config
from transformers import BertForSequenceClassification

from kiwb.core.mc_dropout import deterministic_logits, mc_dropout_mode, mc_logits


def _model(hidden_dropout: float = 0.1, attention_dropout: float = 0.1):
    torch.manual_seed(0)
    config = tiny_bert_config(
        ("x", "y", "z"), vocab_size=50, hidden_dropout_prob=hidden_dropout,
        attention_probs_dropout_prob=attention_dropout,
    )
    return BertForSequenceClassification(config).eval()


def _inputs(batch: int = 3, length: int = 7) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 50, (batch, length), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


@pytest.mark.parametrize("strategy", ["loop", "replicate"])
def test_mc_passes_differ_and_have_shape_k_n_c(strategy):
    logits = mc_logits(_model(), _inputs(), passes=5, strategy=strategy)
    assert logits.shape == (5, 3, 3)
    for k in range(1, 5):
        assert not torch.allclose(logits[0], logits[k])


def test_deterministic_passes_are_identical():
    model, inputs = _model(), _inputs()
    first = deterministic_logits(model, inputs)
    mc_logits(model, inputs, passes=3)
    torch.testing.assert_close(deterministic_logits(model, inputs), first, rtol=0, atol=0)


def test_model_is_back_in_eval_mode_after_sampling_and_after_an_error():
    model = _model()
    mc_logits(model, _inputs(), passes=2)
    assert not any(module.training for module in model.modules())
    with pytest.raises(RuntimeError), mc_dropout_mode(model):
        assert all(module.training for module in model.modules())
        raise RuntimeError("boom")
    assert not any(module.training for module in model.modules())


def test_attention_dropout_is_sampled_too():
    # With hidden dropout off, only attention dropout can make the passes differ: it is a
    # functional call gated on the attention module's flag, not an nn.Dropout module.
    model = _model(hidden_dropout=0.0, attention_dropout=0.3)
    logits = mc_logits(model, _inputs(), passes=4)
    assert not torch.allclose(logits[0], logits[1])


def test_no_dropout_model_gives_identical_passes():
    model = _model(hidden_dropout=0.0, attention_dropout=0.0)
    logits = mc_logits(model, _inputs(), passes=3)
    torch.testing.assert_close(logits[0], logits[2])
    torch.testing.assert_close(logits[0], deterministic_logits(model, _inputs()), rtol=1e-5, atol=1e-6)


def test_sampling_is_reproducible_under_a_seed():
    model, inputs = _model(), _inputs()
    torch.manual_seed(7)
    first = mc_logits(model, inputs, passes=3)
    torch.manual_seed(7)
    torch.testing.assert_close(mc_logits(model, inputs, passes=3), first, rtol=0, atol=0)


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="replicate"):
        mc_logits(_model(), _inputs(), passes=2, strategy="parallel")


def test_passes_run_without_building_a_graph():
    model = _model()
    assert all(parameter.requires_grad for parameter in model.parameters())
    assert not mc_logits(model, _inputs(), passes=2).requires_grad
    assert not deterministic_logits(model, _inputs()).requires_grad


def test_a_text_scores_the_same_in_a_padded_batch_as_alone(teachers_dir):
    # Length-sorted batches are padded to their longest text: padding must not change a
    # text's scores. Texts of very different lengths, in a batch of 3 (so two are padded).
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers.shard_scoring import ScoringSettings, score_texts

    folder = teachers_dir / "teacher_b"  # RoBERTa: padding shifts its position ids too
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    texts = ["goal", "the striker scored a late goal and the crowd sang all the way home",
             "a new album", "rain", "the chef baked bread with garlic and rosemary for the market"]
    settings = ScoringSettings(passes=3, batch_size=3, max_length=64, strategy="loop",
                               dtype="float32", seed=0)
    together = score_texts(model, tokenizer, texts, settings, torch.device("cpu"), shard_seed=0)
    for row, text in enumerate(texts):
        alone = score_texts(model, tokenizer, [text], settings, torch.device("cpu"), shard_seed=0)
        for name in ("det_logits", "det_probs", "det_confidence"):
            torch.testing.assert_close(torch.tensor(together[name][row]), torch.tensor(alone[name][0]),
                                       rtol=1e-4, atol=1e-5)
