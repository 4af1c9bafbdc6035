"""Typed records of what jobs write to the store and what the CLI and the workbench read back:
integration summaries and settings, score-job summaries, and the events of scoring and training.

Producers build these and store `to_dict()`; readers parse with `from_dict()`, so each key is
spelt once. What older versions wrote, the store's migrations rewrite as this version writes it
(kiwb.project.schema), so a record is read one way. A key a record may lack is marked
`optional(...)`: it reads as None and None is left out. Any other missing key is refused with
one line naming the record and the key.
Pure Python: no torch, no textual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from kiwb.core.choices import (
    AUTO_ROUTING,
    DEFAULT_ROUTING,
    FEW_LABEL_ROUTINGS,
    LABEL_READING_ROUTINGS,
    ROUTINGS,
)
from kiwb.core.learning_check import LearningCheck
from kiwb.core.routing_check import RoutingCheck
from kiwb.errors import ConfigError, KiwbError
from kiwb.project.config import ProjectConfig, check_routing
from kiwb.project.config_schema import IntegrationConfig
from kiwb.project.setting_knobs import (
    ALWAYS_ON,
    left_out_when_off,
    shown_of,
    shown_settings,
    stored_only_when_on,
)

if TYPE_CHECKING:  # records are read where no project is (the workbench reads stored ones)
    from kiwb.project.teacher_kinds import LoadedProject

_OPTIONAL = "optional"  # metadata: a key a record may lack; None is written by leaving it out
_RECORD = "record"      # metadata: the value is a record (a class with from_dict/to_dict)
_EACH = "each"          # metadata: the value maps names to records of this class


def optional(record: type | None = None, *, each: type | None = None) -> Any:
    """A key a record may lack (what it holds does not apply to every record): it reads as
    None, and None is left out of the JSON."""
    return field(default=None, metadata={_OPTIONAL: True, _RECORD: record, _EACH: each})


def nested(record: type | None = None, *, each: type | None = None) -> Any:
    """A required key holding a record, or (`each`) a mapping of names to records or a list of
    records."""
    return field(metadata={_RECORD: record, _EACH: each})


class Record:
    """Shared conversion of the records below to and from their stored JSON."""

    what: ClassVar[str] = "record"

    def to_dict(self) -> dict[str, Any]:
        """The JSON object this record is stored as."""
        found = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.metadata.get(_OPTIONAL) or left_out_when_off(spec, value):
                continue
            found[spec.name] = _dump(value)
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        """The record of stored JSON; a required key that is missing raises KiwbError."""
        if not isinstance(data, Mapping):
            raise KiwbError(f"{cls.what}: expected a JSON object, found {type(data).__name__}")
        values = {}
        for spec in fields(cls):
            if spec.name in data:
                values[spec.name] = _load(spec, data[spec.name])
            elif spec.metadata.get(_OPTIONAL):
                values[spec.name] = None
            elif stored_only_when_on(spec):
                values[spec.name] = shown_of(spec).off  # left out while off
            else:
                raise KiwbError(f"{cls.what} has no {spec.name!r} (it has: "
                                f"{', '.join(map(str, data)) or 'nothing'})")
        return cls(**values)


def _dump(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {key: _dump(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_dump(item) for item in value]
    return value


def _load(spec: dataclasses.Field, value: Any) -> Any:
    if value is None:
        return None
    if spec.metadata.get(_RECORD) is not None:
        return spec.metadata[_RECORD].from_dict(value)
    if spec.metadata.get(_EACH) is not None:  # names -> records, or a list of records
        each = spec.metadata[_EACH]
        if isinstance(value, list):
            return [each.from_dict(item) for item in value]
        return {name: each.from_dict(item) for name, item in value.items()}
    return value


# -- integration ---------------------------------------------------------------------------

# Settings an integration's key leaves out at their off value (Shown.off): a key is a hash, which
# no migration can make again, so the keys of integrations made before a setting existed keep
# matching while it is off.
KEYED_ONLY_WHEN_ON = {setting.name: shown.off for setting, shown in shown_settings(IntegrationConfig)
                      if shown.off is not ALWAYS_ON}


@dataclass(frozen=True, kw_only=True)
class IntegrationSettings(Record, IntegrationConfig):
    """The choices that turn scores into targets, as a job resolved them (changing them never
    rescores): kiwb.toml's [integration] table itself (IntegrationConfig, where each setting is
    declared once), with its "auto" settings resolved."""

    what: ClassVar[str] = "integration settings"

    # Routing is "auto" only for a kind that chooses it per project from the scores (the
    # sequence kind): the integration's summary then names the routing chosen
    # (RoutingDetails.name, RoutingChoice).
    routing: str = DEFAULT_ROUTING

    def pinned(self) -> dict[str, Any]:
        """Every setting, as run manifests pin them: less those a record leaves out at their
        off value (Shown.stored_when_off), so the manifests made before such a setting existed
        keep matching."""
        return self.to_dict()

    def keyed(self, *, kept: tuple[str, ...] = (), left_out: tuple[str, ...] = ()) -> dict[str, Any]:
        """The settings as an integration's key pins them: pinned(), less each setting of
        KEYED_ONLY_WHEN_ON at its off value (but those a kind's keys have always held, `kept`),
        and less `left_out` (what a kind pins in its own way, such as the given labels by
        their fingerprint)."""
        values = self.pinned()
        for name, off in KEYED_ONLY_WHEN_ON.items():
            if name not in kept and values.get(name, off) == off:
                values.pop(name, None)
        for name in left_out:
            values.pop(name, None)
        return values

    @classmethod
    def from_project(cls, project: LoadedProject, **overrides) -> IntegrationSettings:
        """The project's [integration] settings with the given (not None) overrides, checked;
        "auto" settings are the teachers' kind's."""
        section = project.config.integration
        values = {each.name: getattr(section, each.name) for each in fields(cls)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values["routing"] == AUTO_ROUTING:  # --routing auto: the kind's, as kiwb.toml's is
            values["routing"] = project.kind.jobs.default_routing
        settings = cls(**values)
        settings.check(project.config)
        return settings

    @property
    def reads_labels(self) -> bool:
        """The routing is fitted on labeled texts where there are some (LABEL_READING_ROUTINGS);
        `uses_labels`: it cannot be fitted without."""
        return self.routing in LABEL_READING_ROUTINGS

    @property
    def uses_labels(self) -> bool:
        """Few-label routing: labeled texts ([data.labeled], and the given labels with
        `labels`) calibrate the routing."""
        return self.routing in FEW_LABEL_ROUTINGS

    def check(self, config: ProjectConfig) -> None:
        """Refuse a routing that does not exist or needs labels the project lacks. (kiwb.toml's
        values are checked when it is read, a job's flags before it is recorded: JobSpec.check.)"""
        if self.routing not in ROUTINGS and self.routing != AUTO_ROUTING:
            raise ConfigError(f"unknown routing {self.routing!r}; choose one of {', '.join(ROUTINGS)}")
        check_routing(config, self.routing, labels=self.labels)


@dataclass(frozen=True, kw_only=True)
class RoutingAccuracy(Record):
    """How often the top-scored teacher knows the true label: MC confidence, plain confidence,
    and the routing used (`chosen`). The routing is named once, where it was resolved: the
    integration's RoutingDetails.name, a run's train.start."""

    what: ClassVar[str] = "routing accuracy"

    mc_dropout: float
    plain_confidence: float
    chosen: float | None = optional()


@dataclass(frozen=True, kw_only=True)
class TeacherRouting(Record):
    """What the routing estimated of one teacher over the pool (the units it won are its
    TeacherFacts.wins)."""

    what: ClassVar[str] = "teacher routing details"

    share: float | None
    split: float | None
    histogram_here: list[int]
    histogram_elsewhere: list[int]
    calibration_error: float | None = optional()   # with a labeled set of its labels
    labeled_own: int | None = optional()
    # representation routings: where its class means (or neighbours) came from, in words
    # ("seeded on 612 pool texts, refitted", "seen: 3,024 of its training texts")
    reference: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class RoutingDetails(Record):
    """The routing an integration used (what it found of each teacher is that teacher's
    TeacherFacts.routing). It names the routing it describes, as resolved: not always the
    settings' (each task of a multi-task integration resolves its own kind's, rank for one task
    and confidence for another)."""

    what: ClassVar[str] = "routing details"

    # (whether it read the MC passes or the plain one is the settings' use_mc)
    name: str
    labeled_texts: int
    # what the per-teacher histograms count: the confidence (None), or the
    # routing's own score where it reads something else (a representation routing's quantile)
    score: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class RoutingChoice(Record):
    """How `routing = "auto"` chose the routing of an integration (kiwb.core.routing_choice):
    the routing, the evidence and, with labeled texts, every candidate's figure on them."""

    what: ClassVar[str] = "routing choice"

    chosen: str           # the candidate's name: "mahalanobis", "rank (plain)"
    routing: str          # the routing it is, and whether it read the MC passes
    use_mc: bool
    basis: str            # "labels" (measured on labeled texts) or "label-free"
    why: str              # one line, for the CLI, the workbench and the model card
    labeled_texts: int    # labeled texts the candidates were measured on (0: label-free)
    where: str | None = optional()  # which labeled texts: "eval", "eval + [data.labeled]", ...
    # candidate name -> its routing accuracy on the labeled texts (or the label-free rule's
    # figure), in the order of preference on a tie
    table: dict[str, float] | None = optional()
    # the choice's own figure, picked on one half of the labeled texts and measured on the
    # other (kiwb.core.routing_choice.choose_on_labels)
    cross_validated: float | None = optional()
    left_out: str | None = optional()  # routings not considered, and why, in one line

    def line(self) -> str:
        """The choice in one line: the routing, and on what it was chosen."""
        return f"{self.chosen} (auto: {self.why})"

    def short(self) -> str:
        """On what it was chosen, in a few words (the workbench's panes)."""
        if self.basis == "labels" and self.table and self.cross_validated is not None:
            return (f"best of {len(self.table)} routings on {self.labeled_texts:,} labeled texts "
                    f"({self.where}), {self.cross_validated:.1%} cross-validated")
        return self.why


@dataclass(frozen=True, kw_only=True)
class GoldLabelUse(Record):
    """How an integration used the labels given to texts (kiwb.project.labels)."""

    what: ClassVar[str] = "gold label use"

    labeled: int           # pool texts with a label: one-hot targets at full weight
    left_out: int          # pool texts marked none of these labels: not trained on
    routing_labels: int    # labeled texts the routing was fitted on ([data.labeled] too)
    eval_left_out: int     # eval texts with a given label, left out of the eval figures
    fingerprint: str       # of every decision the integration read


@dataclass(frozen=True, kw_only=True)
class EvalSummary(Record):
    """Untrained references on the eval set: routing, the Ensemble and each teacher alone."""

    what: ClassVar[str] = "integration eval summary"

    num_texts: int
    routing_accuracy: RoutingAccuracy | None = nested(RoutingAccuracy)
    ensemble_accuracy: float | None
    teacher_accuracy: dict[str, float] | None = optional()
    # method -> right_teacher / wrong_teacher -> counts (the paper's figure 2)
    confidence_histograms: dict[str, dict[str, list[int]]] | None = optional()
    # what the figures were measured on (the eval scores' keys and gold labels, as one key): a
    # training run takes them from the stored integration only while the eval set is the same
    measured_on: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class LabeledFunnel(Record):
    """The class funnel on labeled texts: per class its gold count, and the share of those an
    owning teacher says, the routing sends to an owner saying it, the target has on top."""

    what: ClassVar[str] = "labeled class funnel"

    where: str  # which texts: "eval", or the pool's own labels
    gold: list[int]
    owner_recall: list[float | None]
    routed_recall: list[float | None]
    target_recall: list[float | None]


@dataclass(frozen=True, kw_only=True)
class ClassFunnel(Record):
    """Where each union class goes between the teachers and the targets (kiwb.core.class_funnel),
    one list entry per label of `labels`."""

    what: ClassVar[str] = "class funnel"

    labels: list[str]
    owners: dict[str, list[str]]  # label -> the teachers that know it
    num_texts: int
    owner_says: list[int]
    routed_to_owner: list[int]
    target_texts: list[int]
    target_share: list[float]
    estimated_share: list[float]
    labeled: LabeledFunnel | None = optional(record=LabeledFunnel)

    def rows(self, student_recall: Mapping[str, float | None] | None = None) -> list[dict[str, str]]:
        """One row per class as text, for the CLI's tables, the model card and the workbench:
        the pool's counts and shares (POOL_COLUMNS) and, with labels, each recall step (the
        student's from `student_recall`) and the first step that loses the class
        (RECALL_COLUMNS)."""
        rows = []
        for index, label in enumerate(self.labels):
            says, routed = self.owner_says[index], self.routed_to_owner[index]
            row = {
                "class": label,
                "owner": ", ".join(self.owners.get(label, [])),
                "owner says": f"{says:,}",
                "routed to it": f"{routed:,}" + (f" ({routed / says:.0%})" if says else ""),
                "targets": f"{self.target_texts[index]:,}",
                "est. share": f"{self.estimated_share[index]:.1%}",
                "target share": f"{self.target_share[index]:.1%}",
            }
            if self.labeled is not None:
                steps = [self.labeled.owner_recall[index], self.labeled.routed_recall[index],
                         self.labeled.target_recall[index],
                         None if student_recall is None else student_recall.get(label)]
                for name, value in zip(RECALL_STEPS, steps, strict=True):
                    row[name] = "–" if value is None else f"{value:.0%}"
                if student_recall is None:
                    del row[RECALL_STEPS[-1]]
                row["lost at"] = losing_step(*steps) or ""
            rows.append(row)
        return rows

    def lost_at(self) -> dict[str, str | None]:
        """Per class, the first step before the student that loses it on the labeled texts
        (owner, routing, targets), or None where it reaches the targets; empty without labels
        (the learning check reads it: kiwb.core.learning_check.with_funnel)."""
        if self.labeled is None:
            return {}
        funnel = self.labeled
        return {label: losing_step(funnel.owner_recall[index], funnel.routed_recall[index],
                                   funnel.target_recall[index])
                for index, label in enumerate(self.labels) if funnel.gold[index]}


POOL_COLUMNS = ("class", "owner", "owner says", "routed to it", "targets", "est. share",
                "target share")
RECALL_STEPS = ("owner recall", "routed recall", "target recall", "student recall")
RECALL_COLUMNS = ("class", *RECALL_STEPS, "lost at")


FUNNEL_STEPS = ("owner", "routing", "targets", "student")


def losing_step(*recalls: float | None, drop: float = 0.5) -> str | None:
    """The first step of a class's recall funnel (owner, routing, targets, student) that loses
    at least `drop` of what reached it, or None; a step without a figure is skipped."""
    reached = 1.0
    for step, value in zip(FUNNEL_STEPS, recalls, strict=False):
        if value is None:
            continue
        if reached > 0 and value < reached * (1 - drop):
            return step
        reached = value
    return None


@dataclass(frozen=True, kw_only=True)
class TeacherFacts(Record):
    """What one integration found of one teacher, in one place: the score set it read, the
    units it won, its own labels, its accuracy alone on a labeled pool, its MC dropout and what
    the routing estimated of it."""

    what: ClassVar[str] = "teacher facts"

    name: str
    wins: int  # the units (texts, clusters, pairs) the routing gave it
    labels: list[str] | None = optional()  # its own labels (a multi-task teacher's "task/label")
    accuracy: float | None = optional()  # alone, on a labeled pool's texts
    # the score set its answers were read from (None: a store from before kiwb recorded it)
    score_key: str | None = optional()
    # what its score set recorded of its MC dropout ({"acts": bool, "rate": a rate kiwb set},
    # kiwb.project.dropout_rates.score_set_dropout); None for a set scored before kiwb checked
    dropout: dict | None = optional()
    # what the routing estimated of it (None where the integration routes nothing itself: a
    # sentence encoder's, a multi-task integration's, whose tasks each record their own)
    routing: TeacherRouting | None = optional(record=TeacherRouting)
    # what only its kind records of it, as the summary's `details` for the integration: a
    # sentence encoder's width, coverage and dispersion, a multi-label teacher's confidence
    # histogram per label it owns (OWN_DETAILS)
    own: dict | None = optional()


@dataclass(frozen=True, kw_only=True)
class IntegrationSummary(Record):
    """What one integration found: per teacher its facts (`per_teacher`, in the teachers'
    order), margins, conflicts and the routing's diagnostics.

    `teachers`, `wins`, `score_keys`, `teacher_labels`, `teacher_accuracy` and
    `teacher_dropout` are views of `per_teacher` (a name -> value mapping each), kept for the
    readers that want one fact of every teacher; `kiwb integrate --json` prints them too
    (LEGACY_VIEWS, see `printed`)."""

    what: ClassVar[str] = "integration summary"

    num_texts: int
    per_teacher: list[TeacherFacts] = nested(each=TeacherFacts)
    labels: list[str]
    overlapping_labels: list[str]
    margin_quantiles: dict[str, float]  # "0.5" -> the median margin
    margin_histogram: list[int]
    conflict_threshold: float
    conflicts: int
    routing: RoutingDetails | None = optional(record=RoutingDetails)
    routing_accuracy: RoutingAccuracy | None = optional(record=RoutingAccuracy)  # labeled pools
    ensemble_accuracy: float | None = optional()
    eval: EvalSummary | None = optional(record=EvalSummary)
    gold_labels: GoldLabelUse | None = optional(record=GoldLabelUse)  # with settings.labels
    check: RoutingCheck | None = optional(record=RoutingCheck)  # kiwb.core.routing_check's verdict
    funnel: ClassFunnel | None = optional(record=ClassFunnel)  # where each class goes
    # routing = "auto": the routing chosen for this project, and the table it was chosen from
    routing_choice: RoutingChoice | None = optional(record=RoutingChoice)
    # The kind of teachers integrated (kiwb.kinds). A token integration's units are conflict clusters (num_texts, wins, margins and
    # conflicts count clusters), its labels the entity types and O, its eval figures entity F1
    # in the accuracy fields, and `token` holds what only it has.
    teachers_kind: str
    token: dict | None = optional()
    # What only its kind has, for kinds after the token kind (whose `token` came first): a
    # multi-label integration's texts, shared labels, labeled pairs and eval figures.
    details: dict | None = optional()

    @property
    def routed_by(self) -> str | None:
        """The routing used, as the integration resolved it (what its routing accuracies'
        `chosen` measures; None for kinds that route nothing)."""
        return self.routing.name if self.routing is not None else None

    @property
    def teachers(self) -> list[str]:
        return [facts.name for facts in self.per_teacher]

    @property
    def score_keys(self) -> dict[str, str]:
        return self._each("score_key") or {}

    @property
    def wins(self) -> dict[str, int]:
        return {facts.name: facts.wins for facts in self.per_teacher}

    @property
    def teacher_labels(self) -> dict[str, list[str]] | None:
        return self._each("labels")

    @property
    def teacher_accuracy(self) -> dict[str, float] | None:
        return self._each("accuracy")

    @property
    def teacher_dropout(self) -> dict[str, dict] | None:
        """teacher -> its MC dropout facts, for the teachers whose score set recorded them;
        None when none did."""
        return self._each("dropout")

    def _each(self, fact: str) -> dict | None:
        found = {facts.name: getattr(facts, fact) for facts in self.per_teacher
                 if getattr(facts, fact) is not None}
        return found or None

    def printed(self) -> dict[str, Any]:
        """The JSON `kiwb integrate --json` prints: the record, with LEGACY_VIEWS beside it (and
        the routing's per-teacher details where they were, each with the units it won, and
        OWN_DETAILS in `details`), and `deprecated` naming those keys."""
        views = {name: value for name in LEGACY_VIEWS if (value := getattr(self, name)) is not None}
        found = {**self.to_dict(), **views}
        if self.routing is not None:
            found["routing"] = {**found["routing"], "teachers": {
                facts.name: {"won": facts.wins, **facts.routing.to_dict()}
                for facts in self.per_teacher if facts.routing is not None}}
        owned = {detail: {facts.name: facts.own[own] for facts in self.per_teacher
                          if facts.own and own in facts.own}
                 for detail, own in OWN_DETAILS.items()}
        owned = {detail: values for detail, values in owned.items() if values}
        if owned:
            found["details"] = {**(found.get("details") or {}), **owned}
        # the deprecated keys by name, so that a script can see which it reads before 0.3
        found["deprecated"] = {
            "keys": [*views, *(["routing.teachers"] if self.routing is not None else []),
                     *(f"details.{detail}" for detail in owned)],
            "removed_in": "kiwb 0.3", "read_instead": "per_teacher"}
        return found


# The per-teacher mappings an integration summary held before version 10 folded them into
# `per_teacher` (and the routing details' `teachers`): `kiwb integrate --json` still prints
# them, for scripts that read them (kiwb reads per_teacher). Deprecated: to go in kiwb 0.3.
LEGACY_VIEWS = ("teachers", "score_keys", "wins", "teacher_labels", "teacher_accuracy",
                "teacher_dropout")
# What a summary's `details` held per teacher before version 10 (teacher -> value each), as
# the key of each teacher's `own` that holds it now: a sentence encoder's width, the share of
# the pool it covers, its median dispersion under dropout and its stability histogram; a
# multi-label teacher's confidence histogram per label it owns. `kiwb integrate --json` still
# prints them in details (deprecated with LEGACY_VIEWS).
OWN_DETAILS = {"widths": "width", "coverage": "coverage", "dispersion_median": "dispersion_median",
               "stability_histograms": "stability_histogram",
               "label_histograms": "label_histograms"}


def teacher_facts(teachers: Sequence[str], score_keys: Sequence[str], wins: Sequence[int], *,
                  labels: Sequence[Sequence[str]] | None = None,
                  accuracy: Mapping[str, float] | None = None,
                  routing: Mapping[str, TeacherRouting] | None = None,
                  own: Mapping[str, dict] | None = None) -> list[TeacherFacts]:
    """Each teacher's facts from what an integration works out teacher by teacher, in the
    teachers' order (`labels` in that order too; `accuracy`, `routing` and `own` by name)."""
    return [TeacherFacts(name=name, score_key=key, wins=int(won),
                         labels=None if labels is None else list(labels[index]),
                         accuracy=None if accuracy is None else accuracy.get(name),
                         routing=None if routing is None else routing.get(name),
                         own=None if own is None else own.get(name))
            for index, (name, key, won) in enumerate(zip(teachers, score_keys, wins, strict=True))]


@dataclass(frozen=True, kw_only=True)
class IntegrationRecord(Record):
    """An integration as the store keeps it: its key, settings and summary."""

    what: ClassVar[str] = "stored integration"

    key: str
    dataset: str
    settings: IntegrationSettings = nested(IntegrationSettings)
    summary: IntegrationSummary = nested(IntegrationSummary)
    created_at: float


# -- scoring -------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ScoreShard(Record):
    """A `score.shard` event: one finished shard with its confidence histograms."""

    kind: ClassVar[str] = "score.shard"
    what: ClassVar[str] = "score.shard event"

    teacher: str
    dataset: str
    key: str
    shard: int
    rows: int
    seconds: float
    mc_confidence_hist: list[int]
    det_confidence_hist: list[int]


@dataclass(frozen=True, kw_only=True)
class ScoreJobSummary(Record):
    """What a score job records when it ends: texts scored (and left to another process), and
    the precision and strategy it drew with."""

    what: ClassVar[str] = "score job summary"

    texts: int
    left: int | None = optional()
    precision: str | None = optional()
    strategy: str | None = optional()
    # mc_passes = "auto": the MC passes drawn, and the passes K = max_mc_passes would have drawn
    passes_drawn: int | None = optional()
    passes_at_max: int | None = optional()


# -- training ------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TrainStart(Record):
    kind: ClassVar[str] = "train.start"
    what: ClassVar[str] = "train.start event"

    step: int  # 0 for a fresh run, the checkpoint's step for a resumed one
    total_steps: int
    method: str
    learning_rate: float | None = optional()
    precision: str | None = optional()
    funnel: ClassFunnel | None = optional(record=ClassFunnel)  # where the targets' classes came from
    # the routing its targets were routed by (its evaluations' routing accuracy `chosen`)
    routing: str | None = optional()


@dataclass(frozen=True, kw_only=True)
class TrainStep(Record):
    """Every LOG_EVERY steps: the mean loss since the last one."""

    kind: ClassVar[str] = "train.step"
    what: ClassVar[str] = "train.step event"

    step: int
    loss: float
    lr: float
    texts_per_s: float
    total_steps: int


@dataclass(frozen=True, kw_only=True)
class TrainEval(Record):
    """An evaluation on the eval set, with the learning check against the Ensemble."""

    kind: ClassVar[str] = "train.eval"
    what: ClassVar[str] = "train.eval event"

    step: int
    accuracy: float  # the kind's headline figure, which `metric` names
    # what `accuracy` holds, in words (the kind's headline: "accuracy", "entity F1", "micro
    # F1", "mean task score", "probe score"), so the figure never travels without its name
    metric: str
    macro_f1: float
    per_class_accuracy: dict[str, float | None]
    confusion: list[list[int]]
    num_texts: int
    routing_accuracy: RoutingAccuracy | None = nested(RoutingAccuracy)
    check: LearningCheck | None = optional(record=LearningCheck)
    # A token student's: `accuracy` holds its entity F1, `per_class_accuracy` F1 per type,
    # `confusion` words' types; here precision, recall, strict F1, word accuracy, the entity
    # confusion and boundary errors (kiwb.kinds.token.student.evaluation_figures).
    entity: dict | None = optional()
    # A multi-label student's (accuracy: micro F1 at its thresholds; per_class_accuracy: F1
    # per label; no confusion): Hamming loss, subset accuracy, support, the texts given each
    # label and the thresholds tuned on this eval set (kiwb.kinds.multilabel.student).
    details: dict | None = optional()
    # How well the student reproduces its own training targets on a sample of the pool
    # (kiwb.core.target_fit, in the kind's terms); a multi-task student's per task beside it.
    fit: float | None = optional()
    fit_per_task: dict[str, float] | None = optional()


@dataclass(frozen=True, kw_only=True)
class TrainCheck(Record):
    """Without an eval set: the learning check on the pool's predictions."""

    kind: ClassVar[str] = "train.check"
    what: ClassVar[str] = "train.check event"

    step: int
    check: LearningCheck = nested(LearningCheck)
    fit: float | None = optional()
    fit_per_task: dict[str, float] | None = optional()


@dataclass(frozen=True, kw_only=True)
class BestCheckpoint(Record):
    """The checkpoint a run keeps: its step, eval headline figure and its name (None without an
    eval set), check, fit, and the evaluation's second figure and details. The trainer holds
    it, writes it into each checkpoint's progress and its train.done event."""

    what: ClassVar[str] = "best checkpoint"

    step: int
    accuracy: float | None
    metric: str | None = optional()
    check: LearningCheck | None = optional(record=LearningCheck)
    fit: float | None = optional()
    macro_f1: float | None = optional()
    details: dict | None = optional()

    def beaten_by(self, metrics: dict | None) -> bool:
        """Whether an evaluation beats this checkpoint; without evaluations the newest
        checkpoint is the best, and one with no accuracy (none was measured) counts as -inf."""
        if metrics is None:
            return True
        return self.accuracy is None or metrics["accuracy"] > self.accuracy


@dataclass(frozen=True, kw_only=True)
class TrainDone(Record):
    kind: ClassVar[str] = "train.done"
    what: ClassVar[str] = "train.done event"

    step: int
    best: BestCheckpoint | None = nested(BestCheckpoint)


@dataclass(frozen=True, kw_only=True)
class TrainStopped(Record):
    kind: ClassVar[str] = "train.stopped"
    what: ClassVar[str] = "train.stopped event"

    step: int


TrainEvent = TrainStart | TrainStep | TrainEval | TrainCheck | TrainDone | TrainStopped
TRAIN_EVENTS: dict[str, type[Record]] = {
    event.kind: event for event in (TrainStart, TrainStep, TrainEval, TrainCheck, TrainDone,
                                    TrainStopped)}


def train_event(kind: str, data: Mapping[str, Any]) -> TrainEvent:
    """The typed training event of a stored (kind, data)."""
    if kind not in TRAIN_EVENTS:
        raise KiwbError(f"unknown training event {kind!r}; known: {', '.join(TRAIN_EVENTS)}")
    return TRAIN_EVENTS[kind].from_dict(data)
