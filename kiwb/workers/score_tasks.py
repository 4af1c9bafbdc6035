"""What a score job works through: a score set's task (one teacher over one data set), and the
settings its shards are drawn with. Shared by the scoring, the representation sets and the
readers, below all of them."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from kiwb.project.config import ProjectConfig
from kiwb.workers.data import TextTable
from kiwb.workers.runtime import scoring_precision
from kiwb.workers.shard_scoring import ScoringSettings
from kiwb.workers.teachers import TeacherInfo


@dataclass(frozen=True)
class ScoreTask:
    """One score set: one teacher over one data set."""

    teacher: TeacherInfo
    dataset: str
    table: TextTable
    key: str
    num_shards: int
    shard_size: int
    # How its numbers are drawn (`drawing_key`), recorded with the score set so that readers
    # elsewhere find sets drawn on GPUs they cannot name; None where the plan came from rank 0.
    drawing: dict | None = None
    # The teacher's representation set of the same texts (kiwb.workers.representation_sets),
    # where its kind keeps one: a fresh shard keeps it from its dropout-off forward.
    representation: ScoreTask | None = None

    def shard_rows(self, shard: int) -> range:
        start = shard * self.shard_size
        return range(start, min(start + self.shard_size, len(self.table)))


def resolved_strategy(strategy: str, device=None) -> str:
    """`auto` replicates the K passes on CUDA, where one forward of a batch leaves the chip
    idle (an H200 scored a MiniLM-sized teacher 1.48x faster so, BENCHMARKS.md "GPU check"),
    and loops elsewhere. `device`: a torch.device or its type ("cpu" when None). Replicating
    gives other random draws, so the strategy is part of a score set's key."""
    if strategy != "auto":
        return strategy
    device_type = device if isinstance(device, str) or device is None else device.type
    return "replicate" if device_type == "cuda" else "loop"


def claim_owner() -> str:
    """The owner name of this process's shard claims."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def scoring_settings(config: ProjectConfig, device) -> ScoringSettings:
    scoring = config.scoring
    return ScoringSettings(
        passes=scoring.mc_passes, batch_size=scoring.batch_size, max_length=scoring.max_length,
        strategy=resolved_strategy(scoring.strategy, device),
        dtype=scoring_precision(scoring.dtype, device),
        seed=scoring.seed, dropout=scoring.dropout,
    )


# What to try when a teacher's logits are not finite, by the dtype it was scored in.
NON_FINITE_FIXES = {
    "float16": 'float16 overflows in some models: set [scoring] dtype = "bfloat16" (or "float32")',
    "bfloat16": 'set [scoring] dtype = "float32"; should that fail too, the checkpoint is broken '
                "(try kiwb predict on it)",
    "float32": "its weights hold NaN or overflow even in float32: check the checkpoint with "
               "kiwb predict",
}


def non_finite_message(task: ScoreTask, rows: range, dtype: str) -> str:
    return (f"teacher {task.teacher.name!r} gave NaN or infinite logits on {task.dataset} texts "
            f"{rows.start + 1:,}-{rows.stop:,} under dtype {dtype}; nothing of that shard was "
            f"stored. {NON_FINITE_FIXES[dtype]}")
