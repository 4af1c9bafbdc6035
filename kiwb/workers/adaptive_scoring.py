"""`mc_passes = "auto"`: scoring in rounds, more passes only where the routing is undecided.

Round 0 gives every text FIRST passes from every teacher. The routing (rank routing, the
default, whatever [integration] says: changing the routing must never rescore) is fitted on
the unlabeled texts' round-0 estimates, and after each round a text goes on only while its
decision is not settled (kiwb.core.adaptive_passes), STEP more passes a round, up to
max_mc_passes. Each round's passes are kept beside the score set
(scores/KEY/rounds/round-R-part-P.npz, written atomically), so a killed job resumes at the
part it was scoring; a part's draws are seeded by (seed, round, part), as a shard's are. At
the end every text's passes are summarised into the score set's ordinary shards (with the
passes each text got), which integration and training read like any other.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from kiwb.console import console
from kiwb.core import adaptive_passes as adaptive
from kiwb.core.routing import fit_routing
from kiwb.core.uncertainty import confidence, entropy
from kiwb.errors import KiwbError
from kiwb.project.atomic import atomic_write_with
from kiwb.project.config import ProjectConfig
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers.dropout_check import check_teacher_dropout
from kiwb.workers.runtime import FittedBatch, scoring_precision
from kiwb.workers.score import (
    ScoreTask,
    claim_owner,
    non_finite_message,
    record_shard,
    resolved_strategy,
)
from kiwb.workers.shard_scoring import (
    NonFiniteLogits,
    ScoringSettings,
    score_texts,
)
from kiwb.workers.teachers import load_teacher


@dataclass
class TaskPasses:
    """One score set's passes so far: dropout-off logits of every text, and each text's
    passes (a list of (m, k, C) arrays per round, with the rows they belong to)."""

    task: ScoreTask
    det_logits: np.ndarray | None = None
    rounds: list[tuple[np.ndarray, np.ndarray]] = None  # (rows, pass probs)

    def __post_init__(self):
        self.rounds = self.rounds or []

    def passes_of(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), k, C) passes of texts that all took part in every round so far."""
        parts = []
        for round_rows, probs in self.rounds:
            where = np.searchsorted(round_rows, rows)
            if (where >= len(round_rows)).any() or not np.array_equal(round_rows[where], rows):
                raise KiwbError(f"adaptive scores of teacher {self.task.teacher.name!r}: a round "
                                "lacks texts it should hold; delete the score set's rounds "
                                f"folder ({self.task.key}/rounds) and score again")
            parts.append(probs[where])
        return np.concatenate(parts, axis=1)


def run_adaptive_scoring(config: ProjectConfig, store: Store, tasks: list[ScoreTask], *, device,
                         progress: Callable[[str, int], None] | None = None,
                         should_stop: Callable[[], bool] | None = None,
                         job_id: int | None = None) -> tuple[int, int]:
    """Score the unfinished score sets of `tasks` adaptively; returns (passes the sets hold,
    passes K = max_mc_passes would have drawn for them)."""
    scoring = config.scoring
    counts = adaptive.schedule(scoring.max_mc_passes)
    held = {task.key: TaskPasses(task) for task in tasks}

    def group_of(dataset: str) -> list[TaskPasses]:
        return [held[task.key] for task in tasks if task.dataset == dataset]

    def complete(dataset: str) -> bool:
        return all(len(store.done_shards(p.task.key)) == p.task.num_shards for p in group_of(dataset))

    datasets = [dataset for dataset in dict.fromkeys(task.dataset for task in tasks)
                if not complete(dataset)]
    if not datasets:
        return 0, 0
    loaded = _Loaded(device, store, tasks, config.scoring.dropout)
    # The unlabeled texts' round 0 fits the routing every data set is judged by; read again
    # (its parts are kept) when only another data set is left to score.
    pool = group_of("unlabeled")
    pool_rows = np.arange(len(pool[0].task.table))
    for passes in pool:
        _score_round(config, passes, 0, pool_rows, counts[0], loaded, device, progress
                     if "unlabeled" in datasets else None, should_stop)
    fitted = _fit(pool, pool_rows)
    drawn = at_max = 0
    for dataset in sorted(datasets, key=lambda name: name != "unlabeled"):
        group = group_of(dataset)
        n = len(group[0].task.table)
        at_max += n * len(group) * counts[-1]
        open_rows = np.arange(n)
        for number, count in enumerate(counts):
            added = count - (counts[number - 1] if number else 0)
            if not (dataset == "unlabeled" and number == 0):  # scored above
                for passes in group:
                    _score_round(config, passes, number, open_rows, added, loaded, device,
                                 progress, should_stop)
            if number == len(counts) - 1:
                break
            still = ~_settled(fitted, group, open_rows, scoring.settled_z)
            skipped = int((~still).sum()) * len(group) * (counts[-1] - count)
            if progress is not None and skipped:  # passes not needed count as done
                progress(f"{dataset}: settled", skipped)
            console.print(f"{dataset}: after {count} passes, {int(still.sum()):,} of "
                          f"{len(open_rows):,} texts still undecided", highlight=False)
            open_rows = open_rows[still]
            if len(open_rows) == 0:
                break
        drawn += sum(_write_final(store, passes, job_id) for passes in group)
    return drawn, at_max


class _Loaded:
    """The teacher model in memory (one at a time)."""

    def __init__(self, device, store: Store, tasks: list[ScoreTask], dropout: float | str):
        self.device, self.name, self.model, self.tokenizer, self.batch = device, None, None, None, None
        self.store, self.tasks, self.dropout = store, tasks, dropout
        self.checked: set[str] = set()

    def get(self, task: ScoreTask, batch_size: int):
        if task.teacher.name != self.name:
            self.model = None
            self.model, self.tokenizer = load_teacher(task.teacher, str(self.device),
                                                      self.dropout)
            self.name, self.batch = task.teacher.name, FittedBatch(batch_size)
            if self.name not in self.checked:  # rounds reload it: checked once
                self.checked.add(self.name)
                check_teacher_dropout(self.model, self.tokenizer, self.device, task.teacher,
                                      [t.key for t in self.tasks if t.teacher.name == self.name],
                                      self.store, "sampled", self.dropout)
        return self.model, self.tokenizer, self.batch


def _round_file(config: ProjectConfig, task: ScoreTask, number: int, part: int):
    return ProjectPaths(config.root).score_dir(task.key) / "rounds" / f"round-{number}-part-{part:06d}.npz"


def _part_seed(seed: int, key: str, number: int, part: int) -> int:
    digest = hashlib.sha256(f"{seed}:{key}:{number}:{part}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2


def _score_round(config, passes: TaskPasses, number: int, rows: np.ndarray, added: int, loaded,
                 device, progress, should_stop) -> None:
    """This round's passes of `rows` for one teacher: read where a part was scored before,
    scored (and kept) where not."""
    scoring, task = config.scoring, passes.task
    settings = ScoringSettings(passes=added, batch_size=scoring.batch_size,
                               max_length=scoring.max_length,
                               strategy=resolved_strategy(scoring.strategy, device),
                               dtype=scoring_precision(scoring.dtype, device), seed=scoring.seed,
                               keep_passes=True)
    size = scoring.shard_size
    collected = []
    label = f"{task.teacher.name} · {task.dataset} · round {number + 1}"
    for part, start in enumerate(range(0, len(rows), size)):
        part_rows = rows[start:start + size]
        path = _round_file(config, task, number, part)
        arrays = _kept_part(path, part_rows)
        if arrays is not None:
            if progress is not None:
                progress(label, len(part_rows) * added)
        else:
            model, tokenizer, batch = loaded.get(task, scoring.batch_size)
            try:
                arrays = score_texts(model, tokenizer, [task.table.texts[i] for i in part_rows],
                                     settings, device,
                                     shard_seed=_part_seed(scoring.seed, task.key, number, part),
                                     on_batch=(lambda n: progress(label, n * added))
                                     if progress else None,
                                     should_stop=should_stop, batch=batch)
            except NonFiniteLogits:
                raise KiwbError(non_finite_message(task, range(int(part_rows[0]), int(part_rows[-1]) + 1),
                                                   settings.dtype)) from None
            arrays = {"rows": part_rows, "pass_probs": arrays["pass_probs"],
                      "det_logits": arrays["det_logits"]}
            atomic_write_with(path, lambda handle, arrays=arrays: np.savez(handle, **arrays))
        collected.append(arrays)
    if not collected:
        return
    round_rows = np.concatenate([part["rows"] for part in collected])
    probs = np.concatenate([part["pass_probs"] for part in collected])
    if number == 0:
        passes.det_logits = np.concatenate([part["det_logits"] for part in collected])
    passes.rounds.append((round_rows, probs))


def _kept_part(path, rows: np.ndarray) -> dict | None:
    """A part kept by an earlier run, if it holds exactly these texts (else it is redone)."""
    if not path.exists():
        return None
    try:
        with np.load(io.BytesIO(path.read_bytes())) as data:
            arrays = {name: data[name] for name in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):  # cut short: redone
        return None
    return arrays if "rows" in arrays and np.array_equal(arrays["rows"], rows) else None


def _features(group: list[TaskPasses], rows: np.ndarray):
    det = [torch.from_numpy(passes.det_logits[rows]).double() for passes in group]
    probs = [torch.from_numpy(passes.passes_of(rows)).double() for passes in group]
    return det, probs


def _fit(group: list[TaskPasses], rows: np.ndarray):
    det, probs = _features(group, rows)
    return fit_routing(adaptive.DECISION_ROUTING, [adaptive.features_of(d, p) for d, p in
                                          zip(det, probs, strict=True)])


def _settled(fitted, group: list[TaskPasses], rows: np.ndarray, z: float) -> np.ndarray:
    det, probs = _features(group, rows)
    return adaptive.settled(adaptive.routing_spread(fitted.scores, det, probs), z).numpy()


def _write_final(store: Store, passes: TaskPasses, job_id: int | None) -> int:
    """The score set's ordinary shards from every text's passes (and how many it got)."""
    task = passes.task
    n = len(task.table)
    width = passes.rounds[0][1].shape[2]
    total = np.zeros((n, width), dtype=np.float64)
    entropy_sum = np.zeros(n, dtype=np.float64)
    count = np.zeros(n, dtype=np.int64)
    for round_rows, probs in passes.rounds:
        as_tensor = torch.from_numpy(probs).double()
        total[round_rows] += probs.sum(axis=1)
        entropy_sum[round_rows] += entropy(as_tensor).sum(dim=1).numpy()
        count[round_rows] += probs.shape[1]
    mean = torch.from_numpy(total / count[:, None])
    mean_entropy = torch.from_numpy(entropy_sum / count)
    det_logits = torch.from_numpy(passes.det_logits).double()
    det_probs = det_logits.softmax(-1)
    information = (entropy(mean) - mean_entropy).clamp(min=0.0)
    arrays = {
        "det_logits": det_logits, "det_probs": det_probs, "mc_probs": mean,
        "det_entropy": entropy(det_probs), "mc_entropy": entropy(mean),
        "det_confidence": confidence(det_probs), "mc_confidence": confidence(mean),
        "mutual_information": information,
    }
    paths, owner = ProjectPaths(store.path.parent), claim_owner()
    done = store.done_shards(task.key)
    for shard in range(task.num_shards):
        if shard in done or not store.claim_shard(task.key, shard, owner):
            continue
        rows = task.shard_rows(shard)
        part = {name: value[rows.start:rows.stop].float().numpy() for name, value in arrays.items()}
        part["mc_passes"] = count[rows.start:rows.stop]
        record_shard(store, paths, task, shard, part, 0.0, job_id)
    return int(count.sum())
