"""What the Trainer asks of a student: the one place a kind reads to write its Student.

Each kind runtime's prepare_training returns TrainingData whose `student` is such an object
(kiwb.kinds.sequence.student.SequenceStudent is the sequence kind's; the token, multi-label,
multi-task and embedding kinds have their own). It travels with the run's TrainingData to the
other ranks, so it holds no tensors and no model. tests/test_student_contract.py checks every
kind's Student against this Protocol, its methods' parameters by name and in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class Student(Protocol):
    kind: str  # the teachers' kind (kiwb.kinds) whose student this is
    # (logits, gold ids) -> loss, for a supervised run
    supervised_loss: Callable[..., torch.Tensor]
    # (method, logits, targets, weights, coverage) -> loss, against integrated targets
    distillation_loss: Callable[..., torch.Tensor]

    # -- the model and its inputs
    def load_base(self, base: str, labels: list[str]) -> Any:
        """(model, tokenizer) of the base checkpoint with a head over `labels`."""

    def load_checkpoint(self, folder) -> Any:
        """The model of a saved checkpoint (the Trainer loads its tokenizer itself)."""

    def features(self, tokenizer, data, max_length: int) -> list:
        """The training rows' features."""

    def eval_features(self, tokenizer, data, max_length: int) -> list:
        """The eval set's features."""

    # -- one training step
    def logits(self, model, tokenizer, features, rows, device: torch.device) -> torch.Tensor:
        """The rows' logits, one row per loss unit."""

    def loss_units(self, features, rows) -> int:
        """How many loss terms the rows make (texts, words, pairs)."""

    def row_targets(self, data, rows, features=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' targets and weights, in the order `logits` gives them."""

    def row_gold(self, data, rows, features=None) -> torch.Tensor:
        """The rows' gold ids (a supervised run)."""

    def min_steps(self, data, batch_size: int, configured: int) -> tuple[int, str]:
        """The run's least number of steps, and why when above [training] min_steps."""

    # -- evaluation and the learning check
    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        """The eval set's figures, the headline one under "accuracy"."""

    def fit(self, model, tokenizer, features, data, rows, batch, device, autocast_dtype) -> dict:
        """How well the student reproduces its targets on pool rows: {"fit": share}."""

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        """How often each class is predicted on the features (the pool check)."""

    def eval_check(self, data, metrics: dict, target_shares: list[float]) -> Any:
        """The learning check after an evaluation (kiwb.core.learning_check.LearningCheck)."""

    def pool_check(self, data, predicted_counts: list[int], target_shares: list[float]) -> Any:
        """The learning check without an eval set, from the pool's predicted classes."""

    def target_shares(self, data) -> torch.Tensor:
        """Each class's share of what the student is taught."""
