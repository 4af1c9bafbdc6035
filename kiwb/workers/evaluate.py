"""`kiwb evaluate`: a trained student's figures on any labeled data set."""

from __future__ import annotations

from pathlib import Path

import torch

from kiwb.kinds import kind_named
from kiwb.workers.data import TextTable
from kiwb.workers.kind_runtimes import runtime_of


def evaluate_checkpoint(checkpoint: Path, table: TextTable, device: torch.device,
                        batch_size: int, max_length: int) -> dict:
    """A trained student's figures on `table`, as its kind measures them (kiwb.kinds): the
    headline figure (accuracy, or a tagger's entity F1) under "accuracy"."""
    from kiwb.workers.predict import folder_kind

    return runtime_of(kind_named(folder_kind(checkpoint))).evaluate(checkpoint, table, device,
                                                                    batch_size, max_length)
