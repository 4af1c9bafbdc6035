"""Tiny real sentence encoders for tests: a BERT (WordPiece, 32 wide) as sentence-transformers
lays one out, and a RoBERTa (byte-level BPE, 48 wide) bare, read with pooling set in kiwb.toml;
probe data with a label and a partner text (the same words, reordered) per text."""

from __future__ import annotations

import random
from pathlib import Path

from tiny import (
    bpe_tokenizer,
    make_texts,
    tiny_bert_config,
    tiny_roberta_config,
    wordpiece_tokenizer,
)


def build_encoder(folder: Path, kind: str, *, seed: int, sentence_transformers: bool) -> Path:
    """A randomly initialised tiny encoder (BertModel 32 wide or RobertaModel 48 wide)."""
    import torch
    from transformers import BertModel, RobertaModel

    from kiwb.kinds.embedding.export import write_sentence_transformers_files

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if kind == "bert":
        tokenizer = wordpiece_tokenizer(folder)
        model = BertModel(tiny_bert_config(("x", "y"), len(tokenizer)))
    else:
        tokenizer = bpe_tokenizer(folder)
        config = tiny_roberta_config(("x", "y"), tokenizer)
        config.hidden_size, config.intermediate_size = 48, 96
        model = RobertaModel(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if sentence_transformers:
        write_sentence_transformers_files(folder, "mean", model.config.hidden_size, 64)
    return folder


def probe_rows(count: int, seed: int) -> list[dict]:
    """Texts with their topic and a partner: the same words in another order."""
    rng = random.Random(seed)
    rows = []
    for row in make_texts(count, seed):
        words = row["text"].split()
        rng.shuffle(words)
        rows.append({**row, "partner": " ".join(words)})
    return rows
