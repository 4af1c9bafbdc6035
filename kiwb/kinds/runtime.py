"""A kind's runtime: what the shared jobs ask of a kind for its part of the work, typed.

Each kind's package has a torch-free description (`KIND`, kiwb/kinds/base.py: what the CLI and
the workbench read) and one runtime class, in its `worker.py`, that implements `KindRuntime`:
scoring a shard, reading a data set, integrating, preparing training (with its Student,
kiwb.workers.student_contract), evaluating and predicting, and the optional hooks of
`RuntimeDefaults`. kiwb.workers.kind_runtimes holds one runtime per kind, made once; the
shared jobs call its methods as plain Python, so a reader (or a tool) follows a call from the
CLI into the kind's code without a string in between. A runtime reads its data sets and checks
at import, and imports its torch work inside the methods that need it: the CLI's data and
label commands go through it without loading a model library. tests/test_kind_runtime.py
holds every kind's runtime to this Protocol: its methods, their parameters by name and in
order, and their defaults.

This module stays torch-free (the names in its annotations are only read by type checkers).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # what the methods take and give, for a type checker and a reader
    import numpy as np
    import torch

    from kiwb.kinds.base import TeacherKind
    from kiwb.project.config import DatasetConfig, ProjectConfig
    from kiwb.project.records import IntegrationRecord
    from kiwb.project.store import Store
    from kiwb.workers.data import TextTable
    from kiwb.workers.shard_scoring import ScoringSettings
    from kiwb.workers.training_data import TrainingData, TrainRequest


@runtime_checkable
class KindRuntime(Protocol):
    """The worker side of a kind: every method runs in a job's process (torch loaded)."""

    kind: TeacherKind  # the description of the kind it runs (kiwb.kinds.KINDS holds it)

    def score_shard(self, task, model, tokenizer, rows: range, settings: ScoringSettings,
                    device: torch.device, **options) -> dict[str, np.ndarray]:
        """The score arrays of one shard of a scoring task (kiwb.workers.score stores them);
        `options` are the shared scoring's (on_batch, ...)."""

    def load_table(self, path: str, spec: DatasetConfig, role: str,
                   config: ProjectConfig | None = None) -> TextTable:
        """One data set of the project, as this kind reads it."""

    def integrate(self, config: ProjectConfig, store: Store, settings,
                  tasks: list) -> IntegrationRecord:
        """Targets, conflicts and figures from the stored scores, recorded in the store."""

    def prepare_training(self, config: ProjectConfig, store: Store, request: TrainRequest,
                         tasks: list) -> TrainingData:
        """A run's targets and eval set, and its Student."""

    def evaluate(self, checkpoint: Path, table: TextTable, device: torch.device,
                 batch_size: int, max_length: int) -> dict:
        """A trained student's figures on `table`, the headline one under "accuracy"."""

    def predict(self, folder: Path, texts: list[str], top: int = 3) -> list[str]:
        """One line per text for `kiwb predict`."""

    def check_data(self, config: ProjectConfig, tables: Mapping[str, TextTable],
                   teachers: list) -> None:
        """Refuse, before scoring, gold data the teachers cannot read (one line)."""

    def inspect_teachers(self, config: ProjectConfig) -> list | None:
        """Every teacher of the project, read and checked (one line for a bad one), or None:
        the shared reading of classifier checkpoints applies."""

    def export(self, project_root: Path, run: str, destination: Path, source: Path,
               manifest: Mapping[str, Any], progress) -> Path | None:
        """Write the export folder, or None: the shared classifier export applies."""

    def check_labels(self, file: Path, decisions: list, config: ProjectConfig) -> bool:
        """Refuse, before anything is stored, labels from `kiwb labels import` that this kind's
        conflicts cannot be (one line naming the file and the label). True: they were checked
        so, and each matches a text of the project's data; False: nothing to check here."""


class RuntimeDefaults:
    """What a kind that needs no hook of its own does: nothing to check before scoring nor in
    imported labels, and the shared reading of teachers and the shared export."""

    def check_data(self, config, tables, teachers) -> None:
        return None

    def inspect_teachers(self, config) -> list | None:
        return None

    def export(self, project_root, run, destination, source, manifest, progress) -> Path | None:
        return None

    def check_labels(self, file, decisions, config) -> bool:
        return False
