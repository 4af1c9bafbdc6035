"""Scoring one shard of texts with one teacher: length-sorted batches, per-batch padding."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from kiwb.core.mc_dropout import deterministic_logits, mc_logits
from kiwb.core.uncertainty import confidence, entropy, summarize_passes
from kiwb.workers.representation import RepresentationCapture, stored
from kiwb.workers.runtime import FittedBatch, autocast_context, to_device
from kiwb.workers.sampled_dropout import sampled_dropout

# Arrays stored per (text, teacher). Shapes: (n, C) for the first three, (n,) for the rest.
SCORE_FIELDS = (
    "det_logits", "det_probs", "mc_probs",
    "det_entropy", "mc_entropy", "det_confidence", "mc_confidence", "mutual_information",
)


class NonFiniteLogits(Exception):
    """A batch's logits hold NaN or infinity (half-precision overflow, or broken weights)."""


@dataclass
class ScoringSettings:
    """How a shard is scored (the part of the settings that is not the teacher or data)."""

    passes: int
    batch_size: int
    max_length: int
    strategy: str
    dtype: str
    seed: int
    keep_passes: bool = False  # also store each pass's probabilities (adaptive MC passes)
    # also keep each text's representation ("head" or "mean", kiwb.workers.representation)
    # from the dropout-off forward, as the array "representation"; None: do not
    representation: str | None = None
    # the dropout the MC passes draw with: "model" (the teacher's own) or a rate set in every
    # dropout rate of its config when it is loaded ([scoring] dropout)
    dropout: float | str = "model"


def capped_max_length(tokenizer, max_length: int) -> int:
    """The configured max length, capped by what the model's tokenizer declares it supports."""
    declared = tokenizer.model_max_length
    # Tokenizers without a recorded limit report a huge sentinel (int(1e30)).
    return min(max_length, declared) if declared < 1_000_000 else max_length


def length_sorted_batches(lengths: list[int], batch_size: int) -> list[np.ndarray]:
    """Row indices grouped into batches of similar length, longest first.

    Longest first means an out-of-memory error shows on the first batch, not the last.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def score_texts(
    model, tokenizer, texts: list[str], settings: ScoringSettings, device: torch.device,
    *, shard_seed: int, on_batch: Callable[[int], None] | None = None,
    should_stop: Callable[[], bool] | None = None, batch: FittedBatch | None = None,
    batch_scores: Callable[..., dict[str, np.ndarray]] | None = None,
) -> dict[str, np.ndarray]:
    """All score arrays for `texts`, in input order; halves the batch on CUDA OOM (and
    `batch`, shared by a teacher's shards, keeps the size that fitted). `batch_scores` turns
    a batch's logits into its arrays: a softmax head's by default (a kind with another head,
    such as the multi-label kind's sigmoid, gives its own)."""
    encodings = tokenizer(texts, truncation=True, max_length=capped_max_length(tokenizer, settings.max_length))
    features = [
        {name: encodings[name][row] for name in encodings.keys()} for row in range(len(texts))
    ]
    lengths = [len(feature["input_ids"]) for feature in features]
    progress = ProgressOnce(on_batch)

    def attempt(batch_size: int) -> dict[str, np.ndarray]:
        progress.restart()
        # Seeded per shard, so a shard's MC draws do not depend on which process scores
        # it or what it scored before: a resumed run reproduces an uninterrupted one, and
        # a retry after OOM draws as a run started at the smaller batch would.
        with sampled_dropout(model, device, shard_seed), capturing(model, settings) as capture:
            return _score_features(
                model, tokenizer, features, lengths, settings, batch_size, device,
                progress, should_stop, batch_scores or _batch_scores, capture,
            )

    batch = batch or FittedBatch(settings.batch_size)
    return batch.run(attempt, device, "scoring", items=len(texts))


class ProgressOnce:
    """Passes texts done on to `on_batch` once each, though a retry scores them again.

    A retry after out-of-memory starts over from the first text; it reports only the
    texts beyond those the failed attempt had already reported.
    """

    def __init__(self, on_batch: Callable[[int], None] | None):
        self.on_batch, self.reported, self.done = on_batch, 0, 0

    def restart(self) -> None:
        self.done = 0

    def __call__(self, count: int) -> None:
        self.done += count
        if self.on_batch is not None and self.done > self.reported:
            self.on_batch(self.done - self.reported)
            self.reported = self.done


def capturing(model, settings: ScoringSettings):
    """The representation capture the settings ask for, or a context that keeps nothing."""
    if settings.representation is None:
        return contextlib.nullcontext()
    return RepresentationCapture(model, settings.representation)


@torch.inference_mode()
def _score_features(
    model, tokenizer, features, lengths, settings, batch_size, device, on_batch, should_stop,
    batch_scores, capture: RepresentationCapture | None = None,
) -> dict[str, np.ndarray]:
    columns: dict[str, np.ndarray] = {}
    for batch_rows in length_sorted_batches(lengths, batch_size):
        if should_stop is not None and should_stop():
            raise InterruptedError("scoring stopped at a batch boundary")
        batch = tokenizer.pad([features[row] for row in batch_rows], return_tensors="pt")
        inputs = to_device(batch, device)
        with autocast_context(device, settings.dtype):
            det = deterministic_logits(model, inputs)
            representation = capture.take() if capture is not None else None
            passes = mc_logits(model, inputs, settings.passes, settings.strategy)
        # NaN survives clamping, histograms drop it and argmax takes it as the largest value:
        # one overflowing teacher would win every text. One check (one sync) per batch.
        finite = torch.isfinite(det).all() & torch.isfinite(passes).all()
        if representation is not None:  # a NaN distance would read as the top quantile too
            finite &= torch.isfinite(representation).all()
        if not bool(finite):
            raise NonFiniteLogits()
        arrays = batch_scores(det, passes, settings.keep_passes)
        if representation is not None:
            arrays["representation"] = stored(representation)
        for name, values in arrays.items():
            if name not in columns:
                # float32, but the representation's float16 stays half the size on disk
                kept = np.float16 if values.dtype == np.float16 else np.float32
                columns[name] = np.zeros((len(features), *values.shape[1:]), dtype=kept)
            columns[name][batch_rows] = values
        on_batch(len(batch_rows))
    return columns


def _batch_scores(det_logits: torch.Tensor, pass_logits: torch.Tensor,
                  keep_passes: bool = False) -> dict[str, np.ndarray]:
    det_logits = det_logits.float()  # the statistics in float32, whatever autocast computed in
    det_probs = det_logits.softmax(-1)
    pass_probs = pass_logits.float().softmax(-1)  # (K, n, C)
    summary = summarize_passes(pass_probs)
    arrays = {
        "det_logits": det_logits,
        "det_probs": det_probs,
        "mc_probs": summary.mean_probs,
        "det_entropy": entropy(det_probs),
        "mc_entropy": summary.entropy,
        "det_confidence": confidence(det_probs),
        "mc_confidence": summary.confidence,
        "mutual_information": summary.mutual_information,
    }
    if keep_passes:
        arrays["pass_probs"] = pass_probs.transpose(0, 1)  # (n, K, C)
    return arrays_to_host(arrays)


def arrays_to_host(arrays: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """A batch's (n, ...) score tensors as float32 arrays, in one device-to-host copy for the
    whole batch rather than one per array."""
    n = next(iter(arrays.values())).shape[0]
    packed = torch.cat([value.float().reshape(n, -1) for value in arrays.values()], dim=1).cpu().numpy()
    result, start = {}, 0
    for name, value in arrays.items():
        width = math.prod(value.shape[1:])  # 1 for a per-text value
        result[name] = packed[:, start:start + width].reshape(value.shape).copy()
        start += width
    return result
