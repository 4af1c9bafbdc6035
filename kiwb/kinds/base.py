"""What a teacher kind provides: the one file to read before adding a kind.

kiwb runs every kind of teacher through the same jobs, store, score shards and content cache,
resume, `--devices`, labels store, CLI verbs and workbench panes. What differs between kinds
lives in the kind's own package, `kiwb/kinds/<name>/`:

  __init__.py  KIND, a `TeacherKind` (below): what the kind is and how a teacher checkpoint's
               config.json is read. Torch-free: the CLI and the workbench read it too.
  runtime.py   RUNTIME, a `KindRuntime` (below): the worker side, which imports torch and
               transformers: what scoring stores per text, uncertainty and routing, targets,
               the loss and the metrics, what a conflict is, the export head.
  (more)       the kind's own math and helpers; the token kind has tags.py (tag schemes),
               words.py (words and sub-words), clusters.py (conflict clusters), targets.py,
               metrics.py (entity F1).

A kind is read from the teachers (`architectures` in config.json: the model class names the
head) and must be the same for every teacher of a project. To add one: write its package,
add KIND to `KINDS` in kiwb/kinds/__init__.py and RUNTIME to kiwb/kinds/runtimes.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class TeacherKnowledge:
    """What one teacher knows, as its config.json (and kiwb.toml's override) says."""

    outputs: tuple[str, ...]  # the names of its head's outputs, in id order (labels, or tags)
    classes: tuple[str, ...]  # what the union is made of (its labels, or its entity types)
    scheme: str | None = None  # how outputs name classes, where a kind has schemes (tags)


class TeacherKind(ABC):
    """The torch-free description of a kind of teacher (and of the student it makes)."""

    name: str                 # as recorded: "sequence", "token"
    title: str                # in words, for tables and the model card
    architecture_suffix: str  # the model class a checkpoint's architectures must end with
    auto_model: str           # the transformers Auto class that loads it
    pipeline_tag: str         # the Hub's pipeline tag of the exported student
    unit: str                 # what a conflict is: "text", "span"
    units: str                # what an integration counts, plural: "texts", "clusters"
    headline: str             # a student's headline figure: "accuracy", "entity F1"
    routing_unit: str         # what routing accuracy is counted over: "texts", "gold entities"
    labels_routing: str       # the routing the workbench fits on labels given to conflicts

    @abstractmethod
    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        """What a teacher knows from its head's output names (id2label in id order) and the
        kiwb.toml override; ValueError with one line saying what is wrong and what is expected."""

    @abstractmethod
    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        """The student's output names for teachers that know these classes."""

    def matches(self, architectures: Sequence[str]) -> str | None:
        """The architecture of this kind among a checkpoint's, or None."""
        return next((name for name in architectures if name.endswith(self.architecture_suffix)),
                    None)


class KindRuntime(Protocol):
    """The worker side of a kind (kiwb/kinds/<name>/runtime.py): every method takes and gives
    what the shared jobs pass around; the sequence kind's are kiwb's original code paths."""

    kind: TeacherKind

    def score_shard(self, model: Any, tokenizer: Any, table: Any, rows: range, settings: Any,
                    device: Any, **options: Any) -> dict[str, Any]:
        """The score arrays of one shard's texts for one teacher (numpy, what is stored)."""

    def histogram_values(self, arrays: dict[str, Any]) -> tuple[Any, Any]:
        """The MC and plain confidences a shard's histograms count (Uncertainty pane)."""

    def integrate(self, config: Any, store: Any, settings: Any) -> Any:
        """Integrate the stored scores with `settings`; the integration as recorded."""

    def training_task(self, config: Any, store: Any, request: Any) -> Any:
        """Targets, the student's head, loss and metrics for one training run."""

    def evaluate_checkpoint(self, folder: Any, table: Any, device: Any, batch_size: int,
                            max_length: int) -> dict[str, Any]:
        """A trained student's figures on labeled data (headline figure first)."""
