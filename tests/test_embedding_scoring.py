"""Scoring with a tiny real sentence encoder: its embeddings, their MC dispersion (zero with
dropout off, positive with it), and how much of each text it reads."""

from __future__ import annotations

import pytest
import torch
from tiny import tiny_bert_config, wordpiece_tokenizer

from kiwb.kinds.embedding.scoring import (
    DISPERSION,
    EMBEDDINGS,
    KEPT_SHARE,
    KNOWN_SHARE,
    reading_shares,
    score_embeddings,
)
from kiwb.workers.shard_scoring import ScoringSettings

TEXTS = ["the team won the match today", "the parliament voted on the law",
         "a new song on the radio", "the team and the song"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    from transformers import BertModel

    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(tmp_path_factory.mktemp("encoder"))
    return BertModel(tiny_bert_config(("x", "y"), len(tokenizer))), tokenizer


def settings(passes: int = 4, max_length: int = 32) -> ScoringSettings:
    return ScoringSettings(passes=passes, batch_size=3, max_length=max_length, strategy="loop",
                           dtype="float32", seed=0)


def score(encoder, **changes):
    model, tokenizer = encoder
    return score_embeddings(model, tokenizer, TEXTS, "mean", settings(**changes),
                            torch.device("cpu"), shard_seed=0)


def test_dispersion_is_positive_with_dropout_and_embeddings_are_the_dropout_off_ones(encoder):
    arrays = score(encoder)
    assert arrays[EMBEDDINGS].shape == (4, 32)
    assert (arrays[DISPERSION] > 0).all()
    model, tokenizer = encoder
    model.eval()
    batch = tokenizer(TEXTS[:1], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.mean(1)
    expected = torch.nn.functional.normalize(hidden, dim=-1)[0]
    assert torch.allclose(torch.from_numpy(arrays[EMBEDDINGS][0]), expected, atol=1e-5)


def test_dispersion_is_zero_without_dropout(encoder):
    from transformers import BertModel

    model, tokenizer = encoder
    still = BertModel(tiny_bert_config(("x", "y"), len(tokenizer), hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))
    arrays = score_embeddings(still, tokenizer, TEXTS, "cls", settings(), torch.device("cpu"),
                              shard_seed=0)
    assert arrays[DISPERSION] == pytest.approx([0.0] * 4, abs=1e-6)


def test_the_same_shard_seed_draws_the_same_dispersion(encoder):
    assert score(encoder)[DISPERSION].tolist() == score(encoder)[DISPERSION].tolist()


def test_reading_shares(encoder):
    _, tokenizer = encoder
    # A max_length of half the long text's tokens plus [CLS] and [SEP] keeps half of it.
    long = "the team won the match today"
    count = len(tokenizer(long, add_special_tokens=False)["input_ids"])
    shares = reading_shares(tokenizer, ["the team", long, ""], count // 2 + 2)
    assert shares[KEPT_SHARE].tolist() == pytest.approx([1.0, (count // 2) / count, 1.0])
    # "zzqx" is outside the tiny vocabulary's words.
    unknown = tokenizer.unk_token_id
    ids = tokenizer("the zzqx team", add_special_tokens=False)["input_ids"]
    expected = 1 - ids.count(unknown) / len(ids)
    assert reading_shares(tokenizer, ["the zzqx team"], 32)[KNOWN_SHARE][0] == pytest.approx(expected)
    assert expected < 1.0
