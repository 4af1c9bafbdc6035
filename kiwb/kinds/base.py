"""What a teacher kind provides: the one file to read before adding a kind.

kiwb runs every kind of teacher through the same jobs, store, score shards and content cache,
resume, `--devices`, labels store, CLI verbs and workbench panes. What differs between kinds
lives in the kind's own package, `kiwb/kinds/<name>/`:

  __init__.py  its description, a `TeacherKind` (below): its name and three parts, each a
               subclass of one class below: how a teacher checkpoint's config.json is read
               (`checkpoints`), the words tables and cards use for it (`words`), and what the
               shared jobs may do with it (`jobs`). Torch-free: the CLI and the workbench read it.
  worker.py    its runtime, a class implementing kiwb.kinds.runtime.KindRuntime: the methods
               the shared jobs call for the kind's part of the work (scoring a shard, reading a
               data set, integrating, preparing training with its Student, evaluating,
               predicting), from the kind's own modules beside it (torch, transformers): what
               scoring stores per text, uncertainty and routing, targets, the loss and the
               metrics, what a conflict is, the export head.

The shared modules (kiwb/*.py, core, project, workers, tui) never branch on a kind's name or
import one kind's code: what differs is an attribute or a method of a description's part, or a
method of its runtime (tests/test_kind_boundaries.py greps them; tests/test_kind_runtime.py
holds every runtime to the Protocol). The sequence kind's runtime is the classifier code
paths the other kinds build on (its student.py: SequenceStudent). A kind is read from the
teachers (`architectures` in config.json: the model class names the head; a sequence
classifier's `problem_type` says single-label or multi-label) and must be the same for every
teacher of a project. To add one: write its package (kiwb.kinds.KINDS finds it by its KIND)
and add its runtime to `RUNTIMES` in kiwb/workers/kind_runtimes.py.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kiwb.core.choices import (
    DEFAULT_ROUTING,
    INTEGRATION_METHODS,
    KNOWN_TRAINING_METHODS,
    MULTITASK_METHODS,
    OWN_SCORE_ROUTINGS,
    PAIR_WEIGHTINGS,
    SUPERVISED,
)
from kiwb.errors import spelt_near

# Every kind's methods (an embedding kind's are its pair weightings): a name among them is
# another kind's, not a typo.
ALL_METHODS = frozenset((*KNOWN_TRAINING_METHODS, *MULTITASK_METHODS, *PAIR_WEIGHTINGS))


@dataclass(frozen=True)
class TeacherKnowledge:
    """What one teacher knows, as its config.json (and kiwb.toml's override) says."""

    outputs: tuple[str, ...]  # the names of its head's outputs, in id order (labels, or tags)
    classes: tuple[str, ...]  # what the union is made of (its labels, or its entity types)
    scheme: str | None = None  # how outputs name classes, where a kind has schemes (tags)


class CheckpointReading(ABC):
    """How a kind's teacher checkpoints are recognised and read (config.json and kiwb.toml's
    override), and what loads them and the student they make."""

    architecture_suffix: str  # the model class a checkpoint's architectures must end with
    auto_model: str           # the transformers Auto class that loads it
    pipeline_tag: str         # the Hub's pipeline tag of the exported student
    override_key: str = "labels"   # the [[teachers]] key that renames what a teacher knows
    reads_words: bool = False  # texts are read as words (a fast tokenizer's word alignment)
    # The config.json problem_type this kind's checkpoints have (None: any); kiwb.toml's
    # problem_type in a [[teachers]] entry stands in for a checkpoint that names none.
    problem_type: str | None = None
    # A key of config.json that marks this kind's checkpoints whatever their head's class
    # (multi-task: task_heads); matched before any kind's architecture.
    config_key: str | None = None
    # The kiwb.toml key whose presence makes a project this kind's, whatever its teachers' heads
    # (multi-task: [[tasks]]; embedding: [embedding]); read before the teachers' config.json.
    declared_by: str | None = None
    # Weight-name prefixes a teacher may lack, its kind never reading them (an encoder's
    # pooler, where sentences are pooled from the last hidden states)
    unused_weights: tuple[str, ...] = ()
    # What a teacher must be, said when a folder lacks trained weights
    trained_teacher: str = "a fine-tuned classifier, not a bare encoder"

    @abstractmethod
    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        """What a teacher knows from its head's output names (id2label in id order) and the
        kiwb.toml override; ValueError with one line saying what is wrong and what is expected."""

    @abstractmethod
    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        """The student's output names for teachers that know these classes."""

    def checkpoint_facts(self, model_config: Mapping, folder, teacher, head_kind
                         ) -> tuple[tuple[str, ...], str | None] | None:
        """For a kind that reads checkpoints its own way (embedding: bare encoders), what the
        Teachers pane shows in place of labels and what stops the teacher (None: nothing);
        None: the checkpoint is read as a classifier's or a tagger's. `head_kind`: the kind
        the checkpoint's head names (kiwb.kinds.kind_of_checkpoint), or None. Torch-free."""
        return None

    def matches(self, architectures: Sequence[str], problem_type: str | None = None) -> str | None:
        """The architecture of this kind among a checkpoint's, or None. A sequence classifier's
        head is single-label or multi-label by its problem_type, not its class name."""
        if self.problem_type is not None and problem_type != self.problem_type:
            return None
        return next((name for name in architectures if name.endswith(self.architecture_suffix)),
                    None)


class ResultWording:
    """How tables, logs, the workbench and the model card speak of a kind's teachers, its
    conflicts and its students' figures."""

    title: str                # in words, for tables and the model card
    short_title: str = ""     # beside a model class in the Teachers pane: "NER", "multi-label"
    classes_title: str = "labels"  # what a teacher knows, in words: "labels", "entity types"
    unit: str                 # what a conflict is: "text", "span"
    units: str                # what an integration counts, plural: "texts", "clusters"
    headline: str             # a student's headline figure: "accuracy", "entity F1"
    second_figure: str = "macro-F1"  # the figure beside it (an evaluation's "macro_f1")
    # The Accuracy pane's two figure columns (a run's "accuracy" and "macro_f1")
    accuracy_columns: tuple[str, str] = ("accuracy", "macro-F1")
    routing_unit: str         # what routing accuracy is counted over: "texts", "gold entities"
    # What the live histograms show, for the Uncertainty pane: its title, and each side's name.
    histogram_title: str = "Teacher confidence on the unlabeled texts: MC dropout | plain confidence"
    histogram_names: tuple[str, str] = ("MC dropout", "plain confidence")
    # The routing named in an integration's report where its summary records none (a kind
    # that routes per part, as multi-task per task)
    routing_unrecorded: str = "?"
    # An evaluation table's per-class columns: what a class is, and its figure
    per_class_columns: tuple[str, str] = ("label", "accuracy")
    # An evaluation table's bold overall row (the run's "accuracy")
    overall_row: str = "overall"
    # How a table names the figures an evaluation of this kind adds (its "details"): key ->
    # words (an embedding student's probes: "knn_accuracy" -> "kNN accuracy")
    figure_names: Mapping[str, str] = {}
    # How the exported student's model card speaks of it: summary, unit, labels (its heading),
    # pipeline and call (the usage example).
    card: Mapping[str, str] = {}

    # -- how the workbench shows a conflict whose record has details (kiwb.project.instances):
    # plain strings, so the description stays free of the UI.
    def conflict_row(self, text: str, details: Mapping, teachers: Sequence[str]) -> str:
        """The conflicts list's text cell: the text, with what the kind adds around it."""
        return text

    def conflict_detail(self, details: Mapping, teachers: Sequence[str]) -> list[tuple[str, str]]:
        """The detail view's lines below the text, as (line, style) pairs: "bold" or "dim"."""
        return []

    def knowledge_line(self, classes: Sequence[str], scheme: str | None) -> str:
        """What a teacher knows, in the Teachers pane's detail: its labels."""
        return f"labels: {', '.join(classes)}"

    def best_text(self, best: Mapping) -> str:
        """A run's best evaluation (its "accuracy" and "macro_f1") in its closing log line."""
        second = (f", {self.second_figure} {100 * best['macro_f1']:.2f}%"
                  if best.get("macro_f1") is not None else "")
        return f"{self.headline} {100 * best['accuracy']:.2f}%{second}"

    def evaluation_text(self, metrics: Mapping) -> str:
        """An evaluation's figures in a training log line."""
        return (f"eval {self.headline} {100 * metrics['accuracy']:.1f}%, "
                f"{self.second_figure} {100 * metrics['macro_f1']:.1f}%")

    def integrated_line(self, summary) -> str | None:
        """What an integration of this kind did, in one line for its log and the workbench;
        None: the shared wording (texts each teacher won, the routing, the conflicts)."""
        return None

    def report_tables(self, integration, shared_facts: list[tuple[str, str]]) -> list | None:
        """`kiwb integrate`'s tables (rich Tables) of a recorded integration, where the shared
        ones (routing, wins) do not apply; None: the shared ones. `shared_facts`: the rows
        every kind's facts table carries (the teachers' dropout). Torch-free."""
        return None


class JobBehaviour:
    """What the shared jobs do for a kind (its runtime, kiwb.workers.kind_runtimes, does the work):
    what scoring keeps, the integration methods and routings it takes, and what labels,
    transfer and merging may do with it."""

    # What its score shards hold beyond the shared arrays (kiwb.workers.shard_scoring's), and
    # the arrays the live histograms count (MC, then dropout-off), values in [0, 1].
    stored_fields: tuple[str, ...] = ()
    histogram_fields: tuple[str, str] = ("mc_confidence", "det_confidence")
    adaptive_passes: bool = True  # mc_passes = "auto" applies (routing settles per text)
    # Scoring keeps each teacher's representation of each text (kiwb.workers.representation),
    # which the representation routings (mahalanobis, knn) read; [[teachers]] seen applies.
    keeps_representation: bool = False
    routes: bool = True  # teachers are compared per text (routing): the routing plots apply
    methods: tuple[str, ...] = INTEGRATION_METHODS  # the integration methods it takes
    supervised: bool = True  # a student may train on gold labels instead (kiwb train --method)
    # The routing a project of this kind uses when kiwb.toml sets none (measured per kind on
    # dev data; BENCHMARKS.md): [integration] routing's default is the kind's.
    default_routing: str = DEFAULT_ROUTING
    labels_routing: str       # the routing the workbench fits on labels given to conflicts
    # [integration] settings this kind never applies -> why, in words: one set away from its
    # default is refused in one line before a job starts (kiwb.project.teacher_kinds), never
    # left to do nothing without a word. (A setting made for some kinds only says so in its
    # declaration instead, config_schema's Shown.kinds: ANT's transfer.)
    unused_settings: dict[str, str] = {}
    # Why `kiwb merge` refuses teachers of this kind (one line, with what to do instead), or
    # None: their heads are one linear layer over named outputs, placed row by row.
    merge_refusal: str | None = None
    # Why a teacher of this kind cannot join a project that does not declare the kind (None:
    # it can, or the kind is never read from a checkpoint alone)
    undeclared_refusal: str | None = None

    def conflict_labels(self, details: Mapping | None, labels: Sequence[str]) -> list[str]:
        """The labels a conflict may be given (the number keys, the picker): all of them, or
        (multi-task) those of the conflict's task."""
        return list(labels)

    def configured_method(self, config) -> str:
        """The integration method a project of this kind uses when a job names none: its
        [integration] method (a kind whose methods are set in its own table says so here)."""
        return config.integration.method

    # The checks below are worded with the kind's title (TeacherKind's, which calls them).
    def check_settings(self, title: str, values: Mapping[str, Any], defaults: Mapping[str, Any],
                       unused: Mapping[str, str] | None = None) -> None:
        """ValueError in one line when a setting this kind never applies (`unused`: name ->
        why, else `unused_settings`) is set away from its default; `values` and `defaults` by
        setting name."""
        for name, why in (self.unused_settings if unused is None else unused).items():
            value = values.get(name)
            if value is not None and value != defaults[name]:
                raise ValueError(f"[integration] {name} = {_toml(value)} does not apply to "
                                 f"{title} teachers: {why}; leave it at its default "
                                 f"({_toml(defaults[name])})")

    def check_routing(self, title: str, routing: str | None) -> None:
        """ValueError in one line when `routing` reads what this kind's scoring does not keep
        (a representation routing for a kind without representations)."""
        if routing in OWN_SCORE_ROUTINGS and not self.keeps_representation:
            raise ValueError(f"routing {routing!r} reads each teacher's representation or "
                             f"logits per text, which kiwb keeps for single-label teachers; "
                             f"{title} teachers route with {self.default_routing} (or "
                             "another routing listed in kiwb.toml's help)")

    def check_method(self, title: str, method: str) -> None:
        """ValueError in one line when `method` (or `supervised`) is not one of this kind's."""
        if method != SUPERVISED and method not in self.methods:
            raise ValueError(method_refusal(method, title, (*self.methods, SUPERVISED),
                                            f"choose one of {', '.join(self.methods)} (or "
                                            "supervised)"))


def method_refusal(method: str, title: str, methods: Sequence[str], choose: str) -> str:
    """Why `method` cannot run for a kind's teachers (`methods`: the kind's), ending with
    `choose`: a method of another kind does not apply to them; one kiwb has nowhere and spelt
    near one of theirs is a typo, said so."""
    near = spelt_near(method, methods)
    if near and method not in ALL_METHODS:
        return f"unknown method {method!r}: did you mean {near}? ({choose})"
    return f"method {method!r} does not apply to {title} teachers; {choose}"


def _toml(value: Any) -> str:
    """A setting's value as kiwb.toml writes it (true, 0.5, "rank")."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else json.dumps(value)


class TeacherKind:
    """The torch-free description of a kind of teacher (and of the student it makes): its name,
    as recorded ("sequence", "token"), and three parts by concern: how its checkpoints are read
    (`checkpoints`, a CheckpointReading), how its results are worded (`words`, a
    ResultWording), and what the shared jobs may do with it (`jobs`, a JobBehaviour). A kind
    subclasses each part, giving its attributes without a default and overriding what differs.
    What the jobs call for the kind's work is its runtime (kiwb.workers.kind_runtimes)."""

    def __init__(self, name: str, checkpoints: CheckpointReading, words: ResultWording,
                 jobs: JobBehaviour):
        self.name = name
        self.checkpoints = checkpoints
        self.words = words
        self.jobs = jobs

    def __repr__(self) -> str:
        return f"TeacherKind({self.name!r})"

    @property
    def title(self) -> str:
        """The kind in words, for tables, refusals and the model card."""
        return self.words.title

    def check_settings(self, values: Mapping[str, Any], defaults: Mapping[str, Any],
                       unused: Mapping[str, str] | None = None) -> None:
        """JobBehaviour.check_settings, worded with this kind's title."""
        self.jobs.check_settings(self.title, values, defaults, unused)

    def check_routing(self, routing: str | None) -> None:
        """JobBehaviour.check_routing, worded with this kind's title."""
        self.jobs.check_routing(self.title, routing)

    def check_method(self, method: str) -> None:
        """JobBehaviour.check_method, worded with this kind's title."""
        self.jobs.check_method(self.title, method)
