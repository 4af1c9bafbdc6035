"""Scoring on several ranks: rank 0 deals out shards, every rank scores, rank 0 stores.

Work goes in rounds: rank 0 claims up to one pending shard per rank in the store (so another
`kiwb score` elsewhere does not take them), broadcasts who scores which, scores its own, and
gathers the others' arrays, which it writes as a single-process job would. A shard's MC draws
are seeded by the shard alone (kiwb.workers.score.shard_seed), so the stored scores are those
one process would have made on the same kind of device, whichever rank drew them. Only rank 0
touches the store and the score files, so ranks on other machines need the project's config,
data and teachers at the same paths, but not its store.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kiwb.console import console
from kiwb.errors import KiwbError
from kiwb.project.config import ProjectConfig
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers.collectives import collective
from kiwb.workers.dropout_check import check_teacher_dropout
from kiwb.workers.ranks import RankLost, refuse_mixed_devices
from kiwb.workers.representation import capture_problem
from kiwb.workers.representation_sets import (
    record_representation,
    register_representations,
    representation_mode,
)
from kiwb.workers.runtime import FittedBatch
from kiwb.workers.score import (
    ScoreTask,
    claim_owner,
    non_finite_message,
    record_shard,
    score_shard,
    scoring_settings,
    shard_seed,
)
from kiwb.workers.shard_scoring import (
    NonFiniteLogits,
    ScoringSettings,
)
from kiwb.workers.teachers import load_teacher


@dataclass(frozen=True)
class RankInfo:
    """Who a rank is, as `kiwb jobs` shows it."""

    rank: int
    device: str
    host: str
    pid: int


@dataclass(frozen=True)
class Plan:
    """What rank 0 tells every rank before the first round."""

    # teacher, dataset, key, shards, size, data, and the representation its shards keep
    # (head or mean; None: none, the teacher's kind keeps none or the project keeps none)
    tasks: list[tuple[str, str, str, int, int, str, str | None]]
    settings: ScoringSettings


@dataclass
class RankTally:
    """Texts each rank has scored in this job, for its progress records."""

    ranks: list[RankInfo]
    texts: dict[int, int] = field(default_factory=dict)

    def figures(self) -> dict:
        return {"ranks": [{"rank": info.rank, "device": info.device, "host": info.host,
                           "pid": info.pid, "texts": self.texts.get(info.rank, 0)}
                          for info in self.ranks]}


class _Teachers:
    """The teacher this rank has loaded; a new one replaces it (one model in memory)."""

    def __init__(self, device, check=None):
        self.device, self.name, self.model, self.tokenizer = device, None, None, None
        self.batch: FittedBatch | None = None
        # rank 0's: check_teacher_dropout for each teacher it loads (once), with the store
        self.check, self.checked = check, set()

    def get(self, task: ScoreTask, settings: ScoringSettings):
        if task.teacher.name != self.name:
            self.model = None  # freed before the next one loads
            self.model, self.tokenizer = load_teacher(task.teacher, str(self.device),
                                                      settings.dropout)
            self.name, self.batch = task.teacher.name, FittedBatch(settings.batch_size)
            if self.check is not None and self.name not in self.checked:
                self.checked.add(self.name)
                self.check(self.model, self.tokenizer, task.teacher)
        return self.model, self.tokenizer, self.batch


def _score_item(tasks: list[ScoreTask], item, settings: ScoringSettings, teachers: _Teachers,
                device, keeps: list[str | None], on_batch=None, should_stop=None):
    """One shard's arrays (with the teacher's representation where `keeps` says so) and
    seconds, or ("error", message) for rank 0 to report."""
    task_index, shard = item
    task = tasks[task_index]
    rows = task.shard_rows(shard)
    started = time.perf_counter()
    try:
        model, tokenizer, batch = teachers.get(task, settings)
        mode = keeps[task_index]
        if mode is not None and capture_problem(model, mode) is None:  # else scored without
            settings = dataclasses.replace(settings, representation=mode)
        arrays = score_shard(task, model, tokenizer, rows, settings, device,
                             shard_seed=shard_seed(settings, shard), on_batch=on_batch,
                             should_stop=should_stop, batch=batch)
    except NonFiniteLogits:
        return ("error", non_finite_message(task, rows, settings.dtype))
    except KiwbError as error:
        return ("error", str(error))
    except InterruptedError:
        raise
    except Exception as error:  # noqa: BLE001  (rank 0 records the cause; the job then fails)
        return ("error", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    return arrays, time.perf_counter() - started


def lead_scoring(config: ProjectConfig, store: Store, tasks: list[ScoreTask], *, device,
                 world_size: int, progress: Callable[[str, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, job_id: int | None = None,
                 on_ranks: Callable[[RankTally], None] | None = None) -> RankTally:
    """Rank 0: deal out every pending shard, score its own, store everyone's."""
    import torch.distributed as dist

    settings = scoring_settings(config, device)
    keeps = [representation_mode(config) if task.representation is not None else None
             for task in tasks]
    register_representations(store, [t.representation for t in tasks if t.representation])
    plan = Plan([(task.teacher.name, task.dataset, task.key, task.num_shards, task.shard_size,
                  task.table.fingerprint, mode) for task, mode in zip(tasks, keeps, strict=True)],
                settings)
    _send(dist.broadcast_object_list, [plan], "sending the plan")
    ranks = _gather_all(RankInfo(0, str(device), socket.gethostname(), os.getpid()))
    refuse_mixed_devices([info.device for info in ranks])
    tally = RankTally(ranks)
    if on_ranks is not None:
        on_ranks(tally)
    # Teacher by teacher, so a rank keeps its model loaded from one round to the next.
    pending = [(number, shard) for number, task in enumerate(tasks)
               for shard in range(task.num_shards) if shard not in store.done_shards(task.key)]
    def check(model, tokenizer, teacher) -> None:
        check_teacher_dropout(model, tokenizer, device, teacher,
                              [task.key for task in tasks if task.teacher.name == teacher.name],
                              store, settings.passes, settings.dropout)

    owner, paths, teachers = claim_owner(), ProjectPaths(config.root), _Teachers(device, check)
    stopping = False
    round_items: list = []  # claimed and not yet stored: given back if the job ends midway
    try:
        while pending and not stopping:
            stopping = bool(should_stop and should_stop())
            round_items = []
            while pending and len(round_items) < world_size and not stopping:
                number, shard = pending.pop(0)
                if store.claim_shard(tasks[number].key, shard, owner):
                    round_items.append((number, shard))
            if stopping or not round_items:
                continue
            round_items += [None] * (world_size - len(round_items))
            _send(dist.broadcast_object_list, [round_items], "dealing out shards")
            own, raised = None, None
            if round_items[0] is not None:
                task = tasks[round_items[0][0]]
                label = f"{task.teacher.name} · {task.dataset}"
                try:
                    own = _score_item(tasks, round_items[0], settings, teachers, device, keeps,
                                      on_batch=(lambda n, label=label: progress(label, n))
                                      if progress else None,
                                      should_stop=should_stop)
                except InterruptedError:  # cancelled: the others' shards are still stored
                    own, stopping = ("stopped", ""), True
                except BaseException as error:  # the others wait in the gather: meet them first
                    own, raised = ("stopped", ""), error
            results = _gather_to_lead(own)
            problem = None
            for rank, (item, result) in enumerate(zip(round_items, results, strict=True)):
                if item is None:
                    continue
                task = tasks[item[0]]
                if not isinstance(result, tuple) or isinstance(result[0], str):
                    store.release_shard(task.key, item[1], owner)
                    round_items[rank] = None
                    if isinstance(result, tuple) and result[0] == "error" and problem is None:
                        problem = f"rank {rank} ({ranks[rank].device} on {ranks[rank].host}): {result[1]}"
                    continue
                arrays, seconds = result
                kept = arrays.pop("representation", None)
                record_shard(store, paths, task, item[1], arrays, seconds, job_id)
                representation = task.representation
                if (kept is not None and representation is not None
                        and item[1] not in store.done_shards(representation.key)
                        and store.claim_shard(representation.key, item[1], owner)):
                    record_representation(store, paths, representation, item[1],
                                          {"representation": kept}, seconds)
                round_items[rank] = None
                rows = len(task.shard_rows(item[1]))
                tally.texts[rank] = tally.texts.get(rank, 0) + rows
                if progress is not None and rank != 0:  # rank 0's own advanced batch by batch
                    progress(f"{task.teacher.name} · {task.dataset} · rank {rank}", rows)
            if on_ranks is not None:
                on_ranks(tally)
            if raised is not None:
                raise raised
            if problem is not None:
                raise KiwbError(problem)
    finally:
        for item in round_items:
            if item is not None:
                store.release_shard(tasks[item[0]].key, item[1], owner)
        try:  # every rank leaves its loop, whatever ended this one
            _send(dist.broadcast_object_list, [None], "ending the job")
        except RankLost:
            pass
    if stopping:
        raise InterruptedError("scoring stopped at a round boundary")
    return tally


def follow_scoring(config: ProjectConfig, *, rank: int, device,
                   between_rounds: Callable[[], None] | None = None) -> int:
    """Ranks 1..: score what rank 0 deals out until it says the job is over; texts scored."""
    import torch.distributed as dist

    from kiwb.workers.project_inputs import inspect_teachers, load_datasets

    plan = _receive(dist.broadcast_object_list, "the plan")
    tables = load_datasets(config)
    teachers_by_name = {info.name: info for info in inspect_teachers(config)}
    tasks, keeps = [], []
    for teacher, dataset, key, shards, size, fingerprint, mode in plan.tasks:
        table = tables.get(dataset)
        if teacher not in teachers_by_name or table is None or table.fingerprint != fingerprint:
            raise KiwbError(f"rank {rank} on {socket.gethostname()}: the project here has other "
                            f"data or teachers than rank 0's ({teacher}, {dataset}); every "
                            "machine needs the same kiwb.toml, data files and teachers")
        tasks.append(ScoreTask(teachers_by_name[teacher], dataset, table, key, shards, size))
        keeps.append(mode)
    ranks = _gather_all(RankInfo(rank, str(device), socket.gethostname(), os.getpid()))
    refuse_mixed_devices([info.device for info in ranks])
    loaded, scored = _Teachers(device), 0
    while (round_items := _receive(dist.broadcast_object_list, "the next shards")) is not None:
        if between_rounds is not None:
            between_rounds()
        item = round_items[rank]
        result = None
        if item is not None:
            result = _score_item(tasks, item, plan.settings, loaded, device, keeps)
            if isinstance(result[0], dict):
                scored += len(tasks[item[0]].shard_rows(item[1]))
                console.print(f"rank {rank}: scored {tasks[item[0]].teacher.name} · "
                              f"{tasks[item[0]].dataset} shard {item[1]} ({scored:,} texts so far)",
                              highlight=False, markup=False)
        _gather_to_lead(result)
    return scored


def _send(broadcast, values: list, doing: str) -> None:
    collective(lambda: broadcast(values, src=0), doing)


def _receive(broadcast, what: str):
    holder = [None]
    collective(lambda: broadcast(holder, src=0), f"waiting for {what} from rank 0")
    return holder[0]


def _gather_to_lead(value) -> list | None:
    """Every rank's `value`, at rank 0 (None elsewhere): a shard's arrays travel once."""
    import torch.distributed as dist

    lead = dist.get_rank() == 0
    values: list | None = [None] * dist.get_world_size() if lead else None
    collective(lambda: dist.gather_object(value, values, dst=0), "gathering from the ranks")
    return values


def _gather_all(value) -> list:
    """Every rank's `value` (all ranks get the list; objects are small next to a shard's work)."""
    import torch.distributed as dist

    values: list = [None] * dist.get_world_size()
    collective(lambda: dist.all_gather_object(values, value), "gathering from the ranks")
    return values
