"""Scoring one shard of texts with one NER teacher: per word, from each word's first sub-word.

Each text's words are aligned to the teacher's own sub-words (kiwb.kinds.token.words); a text
longer than the teacher's maximum length is cut into windows of whole words, and the windows
are batched by length like texts are. What is stored is per word, in text order, with
`num_words` per text to find each text's words again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from kiwb.core.mc_dropout import deterministic_logits, mc_logits
from kiwb.kinds.token.tags import TagSet
from kiwb.kinds.token.uncertainty import word_scores
from kiwb.kinds.token.words import Windowing, WordPieces, align_words
from kiwb.workers.runtime import FittedBatch, autocast_context, to_device
from kiwb.workers.sampled_dropout import sampled_dropout
from kiwb.workers.shard_scoring import (
    NonFiniteLogits,
    ProgressOnce,
    ScoringSettings,
    capped_max_length,
    length_sorted_batches,
)


@dataclass
class WindowedShard:
    """A shard's texts cut into windows: which text each window belongs to."""

    windows: list[WordPieces] = field(default_factory=list)
    text_of: list[int] = field(default_factory=list)
    num_words: list[int] = field(default_factory=list)
    windowing: Windowing = field(default_factory=Windowing)


def window_texts(tokenizer, texts_words: list[list[str]], max_length: int) -> WindowedShard:
    """Every text's windows, in text order."""
    shard = WindowedShard()
    for text, words in enumerate(texts_words):
        windows = align_words(tokenizer, words, max_length)
        shard.windows += windows
        shard.text_of += [text] * len(windows)
        shard.num_words.append(len(words))
        shard.windowing = shard.windowing.add(windows)
    return shard


def score_words(model, tokenizer, texts_words: list[list[str]], tag_set: TagSet,
                settings: ScoringSettings, device: torch.device, *, shard_seed: int,
                on_batch: Callable[[int], None] | None = None,
                should_stop: Callable[[], bool] | None = None,
                batch: FittedBatch | None = None) -> tuple[dict[str, np.ndarray], Windowing]:
    """All per-word score arrays of the texts' words, in text and word order, and how many
    texts had to be windowed; halves the batch on CUDA OOM like sequence scoring."""
    shard = window_texts(tokenizer, texts_words, capped_max_length(tokenizer, settings.max_length))
    entity_ids = torch.tensor([i for i, prefix in enumerate(tag_set.prefixes) if prefix != "O"])
    outside = tag_set.outside

    progress = ProgressOnce(on_batch)

    def attempt(batch_size: int) -> list[dict[str, torch.Tensor]]:
        progress.restart()
        with sampled_dropout(model, device, shard_seed):  # seeded per shard, as texts are
            return _score_windows(model, tokenizer, shard, settings, batch_size, device,
                                  progress, should_stop, entity_ids, outside)

    per_window = (batch or FittedBatch(settings.batch_size)).run(
        attempt, device, "scoring", items=len(shard.windows))
    # Each window holds the rows of the words it owns, and a text's windows follow one another
    # in text order, so the windows' rows one after another are the words in text order.
    arrays = {name: torch.cat([rows[name] for rows in per_window]).numpy().astype(np.float32)
              for name in (per_window[0] if per_window else ())}
    arrays["num_words"] = np.asarray(shard.num_words, dtype=np.int64)
    return arrays, shard.windowing


@torch.inference_mode()
def _score_windows(model, tokenizer, shard: WindowedShard, settings: ScoringSettings,
                   batch_size: int, device, on_batch, should_stop, entity_ids: torch.Tensor,
                   outside: int) -> list[dict[str, torch.Tensor]]:
    """Each window's per-word scores of the words it owns, on the CPU, in window order.

    The scores are computed on the device for a whole batch's words at once and copied to the
    host once per batch: per window, the copies of its logits were the token kind's extra cost
    over the K x eval floor on a GPU (1.69x it on an H200)."""
    found: list = [None] * len(shard.windows)
    lengths = [len(window.input_ids) for window in shard.windows]
    texts_left = {text: shard.text_of.count(text) for text in set(shard.text_of)}
    for rows in length_sorted_batches(lengths, batch_size):
        if should_stop is not None and should_stop():
            raise InterruptedError("scoring stopped at a batch boundary")
        windows = [shard.windows[row] for row in rows]
        inputs = to_device(pad_windows(tokenizer, windows), device)
        with autocast_context(device, settings.dtype):
            det = deterministic_logits(model, inputs)  # (B, T, C)
            passes = mc_logits(model, inputs, settings.passes, settings.strategy)  # (K, B, T, C)
        if not bool(torch.isfinite(det).all() & torch.isfinite(passes).all()):
            raise NonFiniteLogits()
        slots, positions, counts = _owned_positions(tokenizer, windows, det.shape[1])
        slots, positions = (torch.as_tensor(values, dtype=torch.long, device=det.device)
                            for values in (slots, positions))
        scores = word_scores(det[slots, positions], passes[:, slots, positions],
                             entity_ids.to(det.device), outside)
        per_name = {name: values.cpu().split(counts) for name, values in scores.items()}
        for slot, row in enumerate(rows):
            found[row] = {name: pieces[slot] for name, pieces in per_name.items()}
        done = 0
        for row in rows:
            texts_left[shard.text_of[row]] -= 1
            done += texts_left[shard.text_of[row]] == 0
        on_batch(done)
    return found


def _owned_positions(tokenizer, windows: list[WordPieces],
                     padded: int) -> tuple[list[int], list[int], list[int]]:
    """The batch slot and token position of the first sub-word of every word each window owns
    (after padding), and how many words each window owns."""
    slots, positions, counts = [], [], []
    for slot, (window, shift) in enumerate(zip(windows, _padding_offsets(tokenizer, windows, padded),
                                               strict=True)):
        start = window.owned.start - window.words.start
        owned = window.first_pieces[start:start + len(window.owned)]
        slots += [slot] * len(owned)
        positions += [piece + shift for piece in owned]
        counts.append(len(owned))
    return slots, positions, counts


def pad_windows(tokenizer, windows: list[WordPieces]) -> dict[str, torch.Tensor]:
    """One padded batch of windows (input ids and attention mask)."""
    return tokenizer.pad([{"input_ids": window.input_ids, "attention_mask": window.attention_mask}
                          for window in windows], return_tensors="pt")


def _padding_offsets(tokenizer, windows: list[WordPieces], padded: int) -> list[int]:
    """How far padding moved each window's tokens: nothing on the right, the pad on the left."""
    if getattr(tokenizer, "padding_side", "right") != "left":
        return [0] * len(windows)
    return [padded - len(window.input_ids) for window in windows]


def score_task_rows(task, model, tokenizer, rows: range, settings: ScoringSettings, device,
                    **options) -> dict[str, np.ndarray]:
    """The token kind's score_shard: per-word arrays of the task's texts at `rows`, with each
    text's word count and how many texts had to be windowed (logged: never silent)."""
    from kiwb.console import console
    from kiwb.kinds.token.tags import read_tag_set

    tag_set = read_tag_set(task.teacher.labels, scheme=task.teacher.scheme)
    arrays, windowing = score_words(model, tokenizer, task.table.words[rows.start:rows.stop],
                                    tag_set, settings, device, **options)
    if windowing.windowed_texts:
        console.print(f"{task.teacher.name} · {task.dataset}: {windowing.windowed_texts:,} of "
                      f"{windowing.texts:,} texts were longer than max_length and were read in "
                      f"{windowing.windows:,} windows", highlight=False, markup=False)
    arrays["windowed_texts"] = np.asarray([windowing.windowed_texts], dtype=np.int64)
    return arrays
