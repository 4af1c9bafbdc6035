"""Scoring one shard with one sentence encoder: its embedding of each text (dropout off, as the
teacher is used), how far its K dropout embeddings scatter (the dispersion), and how much of
each text it reads (what truncation kept, what its vocabulary knows).

The encoder is wrapped so that its pooled embedding stands where a classifier's logits do:
the shared scoring loop (length-sorted batches, seeded dropout, halving on OOM, progress,
stopping, the non-finite check) then serves it unchanged.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from kiwb.kinds.embedding import (
    DISPERSION,
    EMBEDDINGS,
    KEPT_SHARE,
    KNOWN_SHARE,
    STABILITY,
    STEADINESS,
)
from kiwb.kinds.embedding.stability import pass_summary, pooled
from kiwb.workers.shard_scoring import (
    ScoringSettings,
    arrays_to_host,
    capped_max_length,
    score_texts,
)


class PooledEncoder(nn.Module):
    """An encoder whose output's `logits` is its pooled sentence embedding (n, d)."""

    def __init__(self, encoder: nn.Module, pooling: str):
        super().__init__()
        self.encoder, self.pooling = encoder, pooling

    def forward(self, **inputs):
        hidden = self.encoder(**inputs).last_hidden_state  # (n, L, d)
        return SimpleNamespace(logits=pooled(hidden, inputs["attention_mask"], self.pooling))


def embedding_batch_scores(det: torch.Tensor, passes: torch.Tensor,
                           keep_passes: bool = False) -> dict[str, np.ndarray]:
    """A batch's stored arrays from its dropout-off embeddings (n, d) and K passes (K, n, d)."""
    _, dispersion = pass_summary(passes)
    steadiness = (-torch.log10(dispersion.clamp_min(1e-8)) / 4).clamp(0.0, 1.0)
    return arrays_to_host({EMBEDDINGS: nn.functional.normalize(det.float(), dim=-1),
                           DISPERSION: dispersion, STABILITY: 1.0 - dispersion,
                           STEADINESS: steadiness})


def reading_shares(tokenizer, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    """How much of each text the teacher reads: the share of its tokens within max_length, and
    the share that its vocabulary knows (not the unknown token); 1 for an empty text."""
    encoded = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    room = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    unknown = tokenizer.unk_token_id
    kept, known = [], []
    for ids in encoded:
        count = len(ids)
        kept.append(min(1.0, room / count) if count else 1.0)
        known.append(1.0 - sum(1 for token in ids if token == unknown) / count if count else 1.0)
    return {KEPT_SHARE: np.asarray(kept, dtype=np.float32),
            KNOWN_SHARE: np.asarray(known, dtype=np.float32)}


def score_embeddings(encoder: nn.Module, tokenizer, texts: list[str], pooling: str,
                     settings: ScoringSettings, device: torch.device,
                     **options) -> dict[str, np.ndarray]:
    """Every stored array of `texts` under one sentence encoder, in input order."""
    arrays = score_texts(PooledEncoder(encoder, pooling), tokenizer, texts, settings, device,
                         batch_scores=embedding_batch_scores, **options)
    arrays.update(reading_shares(tokenizer, texts,
                                 capped_max_length(tokenizer, settings.max_length)))
    return arrays


def score_task_rows(task, model, tokenizer, rows: range, settings: ScoringSettings,
                    device: torch.device, **options) -> dict[str, np.ndarray]:
    """The embedding kind's score_shard: the arrays of the task's texts at `rows`, read at
    most as far as the encoder was trained to read (sentence-transformers' max_seq_length)."""
    teacher = task.teacher
    length = min(settings.max_length, teacher.reads_up_to or settings.max_length)
    return score_embeddings(model, tokenizer, task.table.texts[rows.start:rows.stop],
                            teacher.pooling, dataclasses.replace(settings, max_length=length),
                            device, **options)


@torch.inference_mode()
def encode_texts(encoder: nn.Module, tokenizer, texts: list[str], pooling: str, max_length: int,
                 batch_size: int, device: torch.device) -> torch.Tensor:
    """(n, d) unit embeddings of `texts`, dropout off, in input order, on the CPU."""
    from kiwb.workers.shard_scoring import length_sorted_batches
    from kiwb.workers.student import collate, tokenize

    was_training = encoder.training
    encoder.eval()
    features = tokenize(tokenizer, texts, max_length)
    found: torch.Tensor | None = None
    try:
        for rows in length_sorted_batches([len(f["input_ids"]) for f in features], batch_size):
            inputs = collate(tokenizer, features, rows, device)
            values = pooled(encoder(**inputs).last_hidden_state, inputs["attention_mask"], pooling)
            if found is None:
                found = torch.zeros(len(texts), values.shape[1])
            found[torch.as_tensor(rows)] = nn.functional.normalize(values.float(), dim=-1).cpu()
    finally:
        encoder.train(was_training)
    return found if found is not None else torch.zeros(0, 0)
