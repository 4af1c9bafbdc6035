"""The token kind's scoring against a reference built word by word: each text's windows read
alone, one forward each, and the per-word scores computed from their first sub-words. With
dropout off the K passes equal the plain forward, so every stored column has one right value."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_ner import TEACHER_A_TYPES, build_ner_teacher, make_sentences, tag_names

from kiwb.kinds.token.scoring import score_words, window_texts
from kiwb.kinds.token.tags import read_tag_set
from kiwb.kinds.token.uncertainty import word_scores
from kiwb.kinds.token.words import merge_windows
from kiwb.workers.shard_scoring import ScoringSettings


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    folder = build_ner_teacher(tmp_path_factory.mktemp("tagger") / "a", "bert", TEACHER_A_TYPES,
                               seed=3, trained=False)
    model = AutoModelForTokenClassification.from_pretrained(
        folder, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).eval()
    return model, AutoTokenizer.from_pretrained(folder)


def reference(model, tokenizer, texts_words, tag_set, max_length: int, passes: int) -> dict:
    """Per text: each window alone through the model, its owned words' first sub-words, merged."""
    entity_ids = torch.tensor([i for i, prefix in enumerate(tag_set.prefixes) if prefix != "O"])
    shard = window_texts(tokenizer, texts_words, max_length)
    columns: dict[str, list] = {}
    for text in range(len(texts_words)):
        windows = [window for window, owner in zip(shard.windows, shard.text_of, strict=True)
                   if owner == text]
        if not windows:
            continue
        rows = []
        for window in windows:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([window.input_ids]),
                               attention_mask=torch.tensor([window.attention_mask])).logits[0]
            rows.append(logits[window.first_pieces])
        det = merge_windows(windows, rows)
        for name, values in word_scores(det, det.expand(passes, *det.shape), entity_ids,
                                        tag_set.outside).items():
            columns.setdefault(name, []).append(values)
    return {name: torch.cat(values).numpy() for name, values in columns.items()}


@pytest.mark.parametrize("max_length", [64, 8])  # 8: most texts are cut into windows
def test_batched_scores_equal_the_word_by_word_reference(teacher, max_length):
    model, tokenizer = teacher
    tag_set = read_tag_set(tag_names(TEACHER_A_TYPES, "bio"), scheme="bio")
    texts = [row["tokens"] for row in make_sentences(24, seed=5)] + [[]]  # a text of no words
    settings = ScoringSettings(passes=3, batch_size=5, max_length=max_length, strategy="loop",
                               dtype="float32", seed=0)
    arrays, windowing = score_words(model, tokenizer, texts, tag_set, settings,
                                    torch.device("cpu"), shard_seed=0)
    expected = reference(model, tokenizer, texts, tag_set, max_length, passes=3)
    assert arrays["num_words"].tolist() == [len(words) for words in texts]
    assert (windowing.windowed_texts > 0) == (max_length == 8)
    assert set(arrays) - {"num_words"} == set(expected)
    for name, values in expected.items():
        assert arrays[name].shape == values.shape, name
        np.testing.assert_allclose(arrays[name], values, atol=1e-5, err_msg=name)
