"""The sequence kind's scoring of a shard: the shared MC-dropout scoring of its texts."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.workers.shard_scoring import ScoringSettings, score_texts


def score_task_rows(task, model, tokenizer, rows: range, settings: ScoringSettings,
                    device: torch.device, **options) -> dict[str, np.ndarray]:
    """The sequence kind's score_shard: the score arrays of the task's texts at `rows`."""
    return score_texts(model, tokenizer, task.table.texts[rows.start:rows.stop], settings,
                       device, **options)
