"""What a training run is asked to do (TrainRequest) and what it learns from, prepared once
(TrainingData: the shape every kind of student fills). The kinds' runtimes (prepare_training)
read and fill these, so they import nothing of the training loop itself."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

import torch

from kiwb.project.records import IntegrationSettings
from kiwb.workers.student_contract import Student


@dataclass
class TrainingData:
    """Everything the loop needs, prepared once; targets come from stored scores. Rows are
    texts; a token run's targets, weights and gold ids are per word (its student maps rows to
    words)."""

    labels: list[str]
    texts: list[str]
    targets: torch.Tensor | None      # (n, |Y|) or (n, N, |Y|) for UHC
    weights: torch.Tensor | None      # (n,)
    label_ids: torch.Tensor | None    # (n,) for the supervised run
    coverage: torch.Tensor
    eval_texts: list[str] | None
    eval_ids: torch.Tensor | None
    eval_routing: dict | None
    manifest: dict
    _: KW_ONLY
    # What depends on the kind of student (kiwb.workers.student_contract says what): its head,
    # its rows, its loss's inputs and its metrics
    student: Student
    eval_reference: dict | None = None  # the Ensemble's accuracy and per-class accuracy
    # The checkpoint the student starts from in place of its base (a merge run's), or None.
    init_from: Path | None = None


@dataclass(frozen=True)
class TrainRequest:
    """One training run: its name, how targets are made, and whether to continue it."""

    run: str
    settings: IntegrationSettings
    resume: bool = False
    init_from_merge: str | None = None  # a merge run whose weights the student starts from
