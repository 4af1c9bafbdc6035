"""`kiwb score`: MC-dropout scores for every (teacher, text), in resumable shards."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from kiwb.console import console
from kiwb.core.histograms import unit_histogram
from kiwb.errors import ConfigError, KiwbError
from kiwb.kinds import DEFAULT_KIND, KINDS, TeacherKind
from kiwb.project.atomic import recover_interrupted_writes
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import settings_key
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import ScoreJobSummary, ScoreShard
from kiwb.project.shard_files import write_shard_file
from kiwb.project.store import Store
from kiwb.workers.dropout_check import check_teacher_dropout
from kiwb.workers.kind_runtimes import runtime_of
from kiwb.workers.project_inputs import inspect_teachers, load_datasets
from kiwb.workers.representation import capture_problem
from kiwb.workers.representation_sets import (
    linked_to_scores,
    record_representation,
    register_representations,
    representation_mode,
)
from kiwb.workers.runtime import FittedBatch, resolve_device, scoring_precision
from kiwb.workers.score_tasks import (
    ScoreTask,
    claim_owner,
    non_finite_message,
    resolved_strategy,
    scoring_settings,
)
from kiwb.workers.shard_scoring import (
    NonFiniteLogits,
    ScoringSettings,
)
from kiwb.workers.teachers import load_teacher, teacher_content_hash, teacher_dropout

# Bump when the stored arrays, their meaning or the way they are drawn change, so old caches
# are not reused. 2: CPU dropout draws through kiwb.core.sampled_dropout. 3: its bits come
# from numpy's SFC64 generator.
SCORE_FORMAT = 3


ProgressCallback = Callable[[str, int], None]  # (description, texts just finished)


def plan_scoring(config: ProjectConfig, store: Store, device=None, *,
                 kind: TeacherKind | None = None) -> list[ScoreTask]:
    """Every score set the project needs, keyed by content (teacher, data, settings) and by
    how the numbers are drawn (see `drawing_key`).

    `device`: the one a score job draws on. Readers (integrate, train) pass none and get, of
    each score set, a complete one whatever device drew it, the configured device's first:
    scores made with `kiwb score --device cpu` on a GPU box, or on another machine, serve.
    `kind`: the teachers' kind, where the job has it (LoadedProject.kind); else read.
    """
    config.require_scoring_inputs()
    tables = load_datasets(config, kind)
    teachers = inspect_teachers(config)
    kind = kind or (KINDS[teachers[0].kind] if teachers else None)
    if kind is not None:  # before any score is drawn
        runtime_of(kind).check_data(config, tables, teachers)
    scoring = config.scoring
    fixed = [KINDS[t.kind] for t in teachers if not KINDS[t.kind].jobs.adaptive_passes]
    if scoring.mc_passes == "auto" and fixed:
        raise ConfigError(f'{config.file}: [scoring] mc_passes = "auto" decides which texts need '
                          "more passes by how their routing settles, which "
                          f"{fixed[0].words.short_title or fixed[0].name} teachers route per "
                          f"{fixed[0].words.unit}: set mc_passes to a number (16 is the default)")
    drawings = ([drawing_key(device, scoring.dtype)] if device is not None
                else readable_drawings(scoring.device, scoring.dtype, store.score_drawings()))
    hashes = [teacher_content_hash(teacher, store) for teacher in teachers]
    # Adaptive passes decide which texts get more passes from every teacher's scores and from
    # the routing fitted on the pool: a teacher's adaptive scores depend on those too.
    context = ({"teachers": hashes, "pool": tables["unlabeled"].fingerprint}
               if scoring.mc_passes == "auto" else None)
    tasks = []
    for teacher, teacher_hash in zip(teachers, hashes, strict=True):
        dropout = teacher_dropout(teacher, scoring.dropout)
        for dataset, table in tables.items():
            content = {
                "format": SCORE_FORMAT, "teacher": teacher_hash, "labels": teacher.labels,
                "data": table.fingerprint, "passes": passes_setting(scoring),
                "max_length": scoring.max_length, "seed": scoring.seed,
                "shard_size": scoring.shard_size,
                **({"adaptive_context": context} if context else {}),
                # a rate kiwb sets in the teacher's dropout ([scoring] dropout); a teacher that
                # keeps its own ("model", and "auto" wherever its own act) adds nothing
                **({"dropout": dropout} if dropout != "model" else {}),
                # The default kind adds nothing: a key is a hash of this content, which the
                # store does not keep, so no migration could re-key the score sets cached
                # before kinds (hours of scoring) if it did.
                **({"kind": teacher.kind} if teacher.kind != DEFAULT_KIND else {}),
                # a multi-task teacher's heads: which outputs answer which task, as what
                **({"heads": [[h.task, h.kind, h.start, h.stop] for h in teacher.heads]}
                   if teacher.heads else {}),
                # a sentence encoder's pooling, and the length it reads at most
                **({"pooling": teacher.pooling, "reads_up_to": teacher.reads_up_to}
                   if teacher.pooling else {}),
            }
            num_shards = -(-len(table) // scoring.shard_size)
            # the strategy `auto` resolves to depends on the drawing's device, as its draws do
            keyed = [(settings_key({**content, **drawing, "strategy": resolved_strategy(
                scoring.strategy, drawing.get("device_type"))}), drawing) for drawing in drawings]
            key, drawing = next(((k, d) for k, d in keyed
                                 if len(store.done_shards(k)) >= num_shards), keyed[0])
            tasks.append(ScoreTask(teacher, dataset, table, key, num_shards, scoring.shard_size,
                                   drawing))
    return linked_to_scores(config, store, tasks)


def passes_setting(scoring) -> int | dict:
    """What a score set's key says of its passes: K, or the adaptive rule."""
    if scoring.mc_passes != "auto":
        return scoring.mc_passes
    from kiwb.core import adaptive_passes as adaptive

    return {"auto": scoring.max_mc_passes, "z": scoring.settled_z, "first": adaptive.FIRST_PASSES,
            "step": adaptive.STEP_PASSES, "routing": adaptive.DECISION_ROUTING}


def drawing_key(device, dtype: str) -> dict:
    """What decides the random draws and the rounding of scores, beyond the settings.

    CPU masks come from numpy's SFC64 generator (kiwb.workers.sampled_dropout), CUDA's from
    its Philox kernels: the same law, other draws, so shards of the two must not fill one
    score set. Which Philox numbers land on which element follows the launch grid and the
    kernel chosen, so CUDA draws are keyed by the GPU model too. The precision is the one
    actually used: autocast applies on CUDA only, so a float16 setting scores in float32
    elsewhere. A CPU drawing is keyed by its precision alone.
    """
    precision = scoring_precision(dtype, device)
    if device.type == "cpu":
        return {"dtype": precision}
    if device.type != "cuda":
        return {"dtype": precision, "device_type": device.type}
    # The name, not the compute capability: the grid follows the SM count, which differs
    # between GPUs of one capability (an A100 and an A30 are both 8.0).
    import torch

    return {"dtype": precision, "device_type": "cuda", "gpu": torch.cuda.get_device_name(device)}


def score_job_summary(texts: int, scoring, device, left: int | None = None) -> ScoreJobSummary:
    """What a score job records when it ends: the texts it scored (and those another process
    still has), and the precision and strategy it drew with."""
    return ScoreJobSummary(texts=texts, left=left,
                           precision=scoring_precision(scoring.dtype, device),
                           strategy=resolved_strategy(scoring.strategy, device))


def readable_drawings(device_setting: str, dtype: str, recorded: Sequence[dict] = ()) -> list[dict]:
    """Every drawing a score set may have been made with, the configured device's first.
    The configured device is read, not checked: reading scores needs no GPU.

    GPU models cannot be listed, so drawings on named GPUs come from `recorded`: those the
    store's score sets were registered with (`Store.score_drawings`), whatever machine drew.
    """
    import torch

    configured = resolve_device("auto") if device_setting == "auto" else torch.device(device_setting)
    candidates = [_configured_drawing(configured, dtype), drawing_key(torch.device("cpu"), dtype)]
    candidates += [_unnamed_cuda_drawing(precision) for precision in ("float32", "bfloat16", "float16")]
    candidates.append(drawing_key(torch.device("mps"), dtype))
    candidates += recorded
    return [drawing for i, drawing in enumerate(candidates) if drawing not in candidates[:i]]


def _configured_drawing(device, dtype: str) -> dict:
    """The drawing of a score job on `device`; for a GPU this machine lacks, the unnamed
    CUDA drawing in its place (its key is the one an unfinished score set is reported by)."""
    import torch

    if device.type == "cuda" and not (torch.cuda.is_available() and
                                      (device.index or 0) < torch.cuda.device_count()):
        return _unnamed_cuda_drawing(dtype)
    return drawing_key(device, dtype)


def _unnamed_cuda_drawing(precision: str) -> dict:
    """A CUDA drawing as kiwb keyed it before it named the GPU model: such score sets stay
    readable."""
    return {"dtype": precision, "device_type": "cuda"}


def register_tasks(store: Store, tasks: list[ScoreTask]) -> None:
    for task in tasks:
        store.register_score_set(
            task.key, teacher=task.teacher.name, dataset=task.dataset,
            num_texts=len(task.table), num_shards=task.num_shards,
            meta={"labels": list(task.teacher.labels), "data": task.table.fingerprint,
                  "source": task.table.source, "shard_size": task.shard_size,
                  # a named GPU's drawing, which readers cannot list (readable_drawings)
                  **({"drawing": task.drawing} if task.drawing and "gpu" in task.drawing else {}),
                  "kind": task.teacher.kind},
        )


def pending_texts(store: Store, tasks: list[ScoreTask]) -> int:
    """How many texts still need scoring across all tasks."""
    total = 0
    for task in tasks:
        done = store.done_shards(task.key)
        total += sum(len(task.shard_rows(s)) for s in range(task.num_shards) if s not in done)
    return total


def run_scoring(
    config: ProjectConfig, store: Store, tasks: list[ScoreTask], *, device,
    progress: ProgressCallback | None = None, should_stop: Callable[[], bool] | None = None,
    job_id: int | None = None,
) -> None:
    """Score every unfinished shard this process can claim, teacher by teacher."""
    paths = ProjectPaths(config.root)
    owner = claim_owner()
    settings = scoring_settings(config, device)
    # the representation sets its shards may keep (idempotent: a score job registered them)
    register_representations(store, [t.representation for t in tasks if t.representation])
    for teacher_name in dict.fromkeys(task.teacher.name for task in tasks):
        teacher_tasks = [task for task in tasks if task.teacher.name == teacher_name]
        if all(len(store.done_shards(t.key)) == t.num_shards for t in teacher_tasks):
            continue  # cached: do not even load the model
        model, tokenizer = load_teacher(teacher_tasks[0].teacher, str(device), settings.dropout)
        check_teacher_dropout(model, tokenizer, device, teacher_tasks[0].teacher,
                              [task.key for task in teacher_tasks], store, settings.passes,
                              settings.dropout)
        batch = FittedBatch(settings.batch_size)  # one teacher's shards share what fitted
        keeps = representation_mode(config)
        problem = capture_problem(model, keeps) if keeps and teacher_tasks[0].representation else None
        if problem:  # its scores do not wait for it: the representation routings will say so
            console.print(f"teacher {teacher_name!r}: its representation is not kept: {problem}",
                          highlight=False, soft_wrap=True)
            keeps = None
        for task in teacher_tasks:
            _score_task(task, model, tokenizer, settings, keeps, device, store, paths, owner,
                        progress, should_stop, job_id, batch)
        del model


def shard_seed(settings: ScoringSettings, shard: int) -> int:
    """A shard's own seed: its draws do not depend on which process scores it, or when."""
    return settings.seed * 1_000_003 + shard


def _score_task(task, model, tokenizer, settings, keeps, device, store, paths, owner, progress,
                should_stop, job_id, batch) -> None:
    description = f"{task.teacher.name} · {task.dataset}"
    for shard in range(task.num_shards):
        if shard in store.done_shards(task.key) or not store.claim_shard(task.key, shard, owner):
            continue
        rows = task.shard_rows(shard)
        started = time.perf_counter()
        representation = task.representation if keeps else None
        if representation is not None and shard not in store.done_shards(representation.key):
            # kept from the dropout-off forward scoring runs anyway
            shard_settings = dataclasses.replace(settings, representation=keeps)
        else:
            shard_settings = settings
        try:
            arrays = score_shard(
                task, model, tokenizer, rows, shard_settings, device,
                shard_seed=shard_seed(settings, shard),
                on_batch=(lambda n: progress(description, n)) if progress else None,
                should_stop=should_stop, batch=batch,
            )
        except NonFiniteLogits:
            store.release_shard(task.key, shard, owner)
            raise KiwbError(non_finite_message(task, rows, settings.dtype)) from None
        except BaseException:
            store.release_shard(task.key, shard, owner)
            raise
        seconds = time.perf_counter() - started
        kept = arrays.pop("representation", None)
        record_shard(store, paths, task, shard, arrays, seconds, job_id)
        if kept is not None and store.claim_shard(representation.key, shard, owner):
            record_representation(store, paths, representation, shard,
                                  {"representation": kept}, seconds)


def score_shard(task: ScoreTask, model, tokenizer, rows: range, settings: ScoringSettings,
                device, **options) -> dict[str, np.ndarray]:
    """The score arrays of one shard's texts by the task's teacher, as its kind scores them
    (per text; a token teacher's per word, with each text's word count)."""
    return runtime_of(KINDS[task.teacher.kind]).score_shard(task, model, tokenizer, rows, settings,
                                                           device, **options)


def record_shard(store: Store, paths: ProjectPaths, task: ScoreTask, shard: int,
                 arrays: dict[str, np.ndarray], seconds: float, job_id: int | None) -> None:
    """Store a scored shard: its file (atomically), then its row as done, then its event."""
    rows = task.shard_rows(shard)
    # What a killed scorer of this shard left half-written; the claim makes it ours.
    shard_file = paths.shard_file(task.key, shard)
    recover_interrupted_writes(shard_file.parent, target=shard_file.name)
    arrays["rows"] = np.arange(rows.start, rows.stop, dtype=np.int64)
    size, sha256 = write_shard_file(shard_file, arrays)
    store.finish_shard(task.key, shard, rows=len(rows), seconds=seconds, row_start=rows.start,
                       size=size, sha256=sha256)
    event = ScoreShard(
        teacher=task.teacher.name, dataset=task.dataset, key=task.key, shard=shard,
        rows=len(rows), seconds=round(seconds, 3),
        **{name: unit_histogram(_counted(arrays, field)) for name, field in zip(
            ("mc_confidence_hist", "det_confidence_hist"),
            KINDS[task.teacher.kind].jobs.histogram_fields, strict=True)})
    store.append_event(event.kind, event.to_dict(), job_id=job_id)


def _counted(arrays: dict[str, np.ndarray], name: str) -> np.ndarray:
    """The values a shard's histogram counts: every text's, or (a token teacher) those of the
    words in its own entity spans, where what it knows shows; a multi-task teacher's, those of
    all its heads."""
    if name not in arrays:
        return np.concatenate([values.ravel() for key, values in arrays.items()
                               if key.endswith("/" + name)])
    values = arrays[name]
    return values[arrays["in_span"] > 0] if "in_span" in arrays else values
