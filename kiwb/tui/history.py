"""State derived from store events: confidence histograms of scoring, and training runs.

Pure Python (no Textual): the panes feed these the events the store feed delivers, oldest
first, so a restarted workbench rebuilds the same state from the same events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kiwb.core.learning_check import LearningCheck
from kiwb.project.records import (
    TRAIN_EVENTS,
    BestCheckpoint,
    ClassFunnel,
    ScoreShard,
    TrainCheck,
    TrainDone,
    TrainEval,
    TrainEvent,
    TrainStart,
    TrainStep,
    TrainStopped,
    train_event,
)

BINS = 20


def _add(total: list[int], counts: list[int], sign: int = 1) -> None:
    for index, value in enumerate(counts[:len(total)]):
        total[index] += sign * value


@dataclass
class TeacherHistograms:
    """One teacher's confidence histograms on one data set, summed over its finished shards."""

    teacher: str
    key: str
    mc: list[int] = field(default_factory=lambda: [0] * BINS)
    det: list[int] = field(default_factory=lambda: [0] * BINS)
    shards: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)

    @property
    def texts(self) -> int:
        return sum(self.mc)


class ScoreHistograms:
    """`score.shard` events of one data set folded into per-teacher histograms.

    A teacher scored again under a new key (changed checkpoint, data or settings) starts
    over, so the plots show the scores that integration will read.
    """

    def __init__(self, dataset: str = "unlabeled"):
        self.dataset = dataset
        self._teachers: dict[str, TeacherHistograms] = {}

    def add(self, event: dict[str, Any]) -> bool:
        """Fold in one event; True when it changed a histogram."""
        if event["kind"] != ScoreShard.kind:
            return False
        shard = ScoreShard.from_dict(event["data"])
        if shard.dataset != self.dataset:
            return False
        current = self._teachers.get(shard.teacher)
        if current is None or current.key != shard.key:
            current = self._teachers[shard.teacher] = TeacherHistograms(shard.teacher, shard.key)
        mc, det = list(shard.mc_confidence_hist), list(shard.det_confidence_hist)
        previous = current.shards.get(shard.shard)
        if previous is not None:  # a shard recorded twice counts once
            _add(current.mc, previous[0], -1)
            _add(current.det, previous[1], -1)
        current.shards[shard.shard] = (mc, det)
        _add(current.mc, mc)
        _add(current.det, det)
        return True

    def teachers(self, order: list[str] | None = None) -> list[TeacherHistograms]:
        """Teachers in `order` (the config's) first, then any others as they appeared."""
        names = [name for name in order or [] if name in self._teachers]
        names += [name for name in self._teachers if name not in names]
        return [self._teachers[name] for name in names]


@dataclass
class RunHistory:
    """A training run as its `train.*` events tell it."""

    run: str
    method: str | None = None
    total_steps: int | None = None
    step: int = 0
    state: str = "running"
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    evals: list[TrainEval] = field(default_factory=list)
    checks: list[tuple[int, LearningCheck]] = field(default_factory=list)  # (step, check)
    kept: BestCheckpoint | None = None  # the checkpoint the finished run keeps (train.done)
    funnel: ClassFunnel | None = None  # where its targets' classes came from
    routing: str | None = None  # the routing its targets were routed by

    def add(self, event: TrainEvent) -> None:
        if isinstance(event, TrainStart):
            if event.step == 0 and (self.steps or self.evals):  # started afresh (or a
                # merge run replaced with --force: it has an evaluation and no steps)
                self.steps, self.losses, self.evals, self.checks = [], [], [], []
            self.method, self.total_steps = event.method, event.total_steps
            # a resumed run's start may lack the funnel; a fresh start has its own (or none)
            self.funnel = event.funnel if event.step == 0 else event.funnel or self.funnel
            self.routing = event.routing or self.routing
            self.step, self.state = event.step, "running"
            self._drop_after(self.step)
        elif isinstance(event, TrainStep):
            self.steps.append(event.step)
            self.losses.append(float(event.loss))
            self.step, self.total_steps = event.step, event.total_steps
        elif isinstance(event, TrainEval | TrainCheck):  # train.check: no eval set, the pool's
            if isinstance(event, TrainEval):
                self.evals.append(event)
            self.step = max(self.step, event.step)
            if event.check is not None:
                self.checks.append((event.step, event.check))
        elif isinstance(event, TrainDone):
            self.state, self.step = "done", event.step
            self.kept = event.best
        elif isinstance(event, TrainStopped):
            self.state, self.step = "stopped", event.step

    def _drop_after(self, step: int) -> None:
        """A resumed run repeats the steps after its last checkpoint: keep one copy of each."""
        keep = [i for i, s in enumerate(self.steps) if s <= step]
        self.steps = [self.steps[i] for i in keep]
        self.losses = [self.losses[i] for i in keep]
        self.evals = [e for e in self.evals if e.step <= step]
        self.checks = [(at, check) for at, check in self.checks if at <= step]
        self.kept = None

    @property
    def check(self) -> LearningCheck | None:
        """The learning check of the kept checkpoint once done, else of the latest evaluation."""
        if self.state == "done" and self.kept is not None and self.kept.check is not None:
            return self.kept.check
        return self.checks[-1][1] if self.checks else None

    @property
    def latest_eval(self) -> TrainEval | None:
        return self.evals[-1] if self.evals else None

    @property
    def best_eval(self) -> TrainEval | None:
        """The evaluation of the checkpoint the run keeps: the finished run's train.done names
        it (the trainer's BestCheckpoint); a running one's best so far, as the trainer picks
        (the first of the highest)."""
        if self.kept is not None:
            kept = [evaluation for evaluation in self.evals if evaluation.step == self.kept.step]
            if kept:
                return kept[-1]
        return max(self.evals, key=lambda e: e.accuracy) if self.evals else None


class Runs:
    """Every run seen in the events, in the order they first appeared."""

    def __init__(self) -> None:
        self.by_name: dict[str, RunHistory] = {}

    def add(self, event: dict[str, Any]) -> bool:
        if not event["kind"].startswith("train.") or not event.get("run"):
            return False
        if event["kind"] not in TRAIN_EVENTS:
            return False
        run = self.by_name.setdefault(event["run"], RunHistory(event["run"]))
        run.add(train_event(event["kind"], event["data"]))
        return True

    def __iter__(self):
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)
