"""Representation sets: each teacher's representation of a data set's texts, in resumable
shards beside its score sets (the same store tables, claims and shard files).

A representation set is keyed by what decides it (the teacher, the texts, the max length, head
or mean), not by the MC settings: changing K or the seed keeps it. A fresh score job keeps it
from the dropout-off forward it runs anyway (kiwb.workers.shard_scoring); where a score set is
already done without one (a project scored before kiwb kept them), or where the job scores on
several processes or with adaptive passes, `run_representations` draws it afterwards: one
dropout-off forward per text, the MC scores untouched. A teacher's `seen` texts (its own
training texts, kiwb.toml [[teachers]] seen) have a representation set and no score set.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch

from kiwb.core.choices import AUTO_ROUTING, READS_REPRESENTATION
from kiwb.errors import DataError, KiwbError
from kiwb.kinds import KINDS
from kiwb.project.atomic import recover_interrupted_writes
from kiwb.project.config import ProjectConfig
from kiwb.project.config_schema import hub_dataset
from kiwb.project.fingerprint import settings_key, texts_fingerprint
from kiwb.project.paths import ProjectPaths
from kiwb.project.shard_files import write_shard_file
from kiwb.project.shards import REPRESENTATION_SUFFIX
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.data import TextTable, open_text_columns, row_name
from kiwb.workers.representation import RepresentationCapture, capture_problem, stored
from kiwb.workers.runtime import FittedBatch, autocast_context, to_device
from kiwb.workers.score_tasks import ScoreTask, claim_owner, non_finite_message, scoring_settings
from kiwb.workers.shard_checks import checked_shards
from kiwb.workers.shard_scoring import (
    NonFiniteLogits,
    ProgressOnce,
    ScoringSettings,
    capped_max_length,
    length_sorted_batches,
)

# Bump when what a representation set holds, or how it is drawn, changes.
REPRESENTATION_FORMAT = 1
SEEN = "seen"  # the dataset name of a teacher's seen texts
# A teacher's seen texts beyond this many are read evenly spread: class means and a covariance
# settle on a few thousand texts, and each costs a forward.
SEEN_TEXTS = 4096


@dataclasses.dataclass(frozen=True)
class SeenTexts:
    """A teacher's seen texts as read: the table, and each text's class index within the
    teacher's labels where the file gives labels."""

    table: TextTable
    classes: np.ndarray | None
    total: int  # rows in the file (the table holds at most SEEN_TEXTS of them)


def representation_mode(config: ProjectConfig) -> str | None:
    mode = config.scoring.representation
    return None if mode == "none" else mode


def representations_wanted(config: ProjectConfig) -> bool:
    """Whether the project reads representations: a score job then draws those its score sets
    lack (`kiwb score --representations` asks for them whatever the project reads)."""
    return representation_mode(config) is not None and (
        # "auto" measures the routings that read them, where the teachers' kind keeps them
        config.integration.routing in (*READS_REPRESENTATION, AUTO_ROUTING)
        or any(teacher.seen is not None for teacher in config.teachers))


def linked_to_scores(config: ProjectConfig, store: Store, tasks: list) -> list:
    """The score tasks, each linked (`representation`) to its teacher's representation set of
    the same texts where the teacher's kind keeps one."""
    mode = representation_mode(config)
    if mode is None:
        return tasks
    linked = []
    for task in tasks:
        if KINDS[task.teacher.kind].jobs.keeps_representation:
            task = dataclasses.replace(task, representation=_representation_task(
                store, task.teacher, task.dataset, task.table, config, mode))
        linked.append(task)
    return linked


def seen_tasks(config: ProjectConfig, store: Store, teachers: list) -> dict[str, tuple]:
    """Per teacher with `seen` texts: (its representation task, its SeenTexts)."""
    mode = representation_mode(config)
    found = {}
    for number, (entry, teacher) in enumerate(zip(config.teachers, teachers, strict=True), start=1):
        if entry.seen is None:
            continue
        if not KINDS[teacher.kind].jobs.keeps_representation:
            raise DataError(f"{config.file}: teachers[{number}].seen applies to single-label "
                            f"classifiers, and teacher {entry.name!r} is a "
                            f"{KINDS[teacher.kind].title} model: remove seen")
        if mode is None:
            raise DataError(f'{config.file}: teacher {entry.name!r} has seen texts, which only the '
                            'representation routings read, and [scoring] representation = "none" '
                            'turns representations off: set it to "head" or remove seen')
        seen = read_seen(config, entry, teacher, number)
        found[teacher.name] = (_representation_task(store, teacher, SEEN, seen.table, config, mode),
                               seen)
    return found


def read_seen(config: ProjectConfig, entry, teacher, number: int) -> SeenTexts:
    """A teacher's seen file (`entry`, kiwb.toml's teachers[`number`]): its texts (evenly spread
    down to SEEN_TEXTS) and, from the label column where there is one, each text's class; one
    line for every fault."""
    path = config.resolve(entry.seen, allow_hub_id=False)
    where = f"teachers[{number}].seen ({path})"
    if hub_dataset(path) is not None:  # seen has no split or subset key to name one by
        raise DataError(f"{where}: seen texts are read from a file or a saved folder, not the "
                        "Hub; save the teacher's training split to one (datasets' to_json) and "
                        "point seen at it")
    text_column = entry.seen_text_column or "text"
    try:
        dataset = open_text_columns(path, ((text_column, "seen_text_column"),
                                           (entry.seen_label_column, "seen_label_column")),
                                    None, None, "unlabeled")
    except DataError as error:  # the data reader names [data.ROLE]; here it is the teacher
        raise DataError(str(error).replace(
            "set split in kiwb.toml [data.unlabeled]", "point seen at one split's folder or file"
        ).replace("kiwb.toml [data.unlabeled]", f"teachers[{number}] of kiwb.toml")) from None
    label_column = entry.seen_label_column or ("label" if "label" in dataset.column_names else None)
    total = len(dataset)
    file_rows = list(range(total))
    if total > SEEN_TEXTS:
        file_rows = [int(i * total / SEEN_TEXTS) for i in range(SEEN_TEXTS)]
        dataset = dataset.select(file_rows)
    texts = list(dataset[text_column])
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise DataError(f"{where}: {row_name(path, file_rows[row])} of column "
                            f"{text_column!r} is {text!r}, not a text; remove or fill that row")
    classes = None
    if label_column is not None:
        classes = _seen_classes(dataset, label_column, teacher, where, path, file_rows)
    return SeenTexts(TextTable(path, texts, None, texts_fingerprint(texts)), classes, total)


def _seen_classes(dataset, column: str, teacher, where: str, path: str,
                  file_rows: list[int]) -> np.ndarray:
    """Each seen text's class index: a label name of the teacher's, or (a ClassLabel column)
    the name its id stands for; one line for a missing or unknown label."""
    names = getattr(dataset.features[column], "names", None)  # a ClassLabel column holds ids
    index = {label: i for i, label in enumerate(teacher.labels)}
    classes = []
    for row, value in enumerate(dataset[column]):
        if value is None or (names is not None and value < 0):  # -1: ClassLabel's "no label"
            raise DataError(f"{where}: {row_name(path, file_rows[row])} of column {column!r} "
                            "has no label; give it one or remove the row")
        label = names[value] if names is not None else str(value)
        if label not in index:
            unknown = sorted({str(names[v] if names is not None else v)
                              for v in dataset[column] if v is not None} - set(index))
            raise DataError(f"{where}: labels {', '.join(map(repr, unknown[:5]))} of column "
                            f"{column!r} are not among the labels of teacher {teacher.name!r} "
                            f"({', '.join(teacher.labels)}); fix the column, or set "
                            "seen_label_column to the right one")
        classes.append(index[label])
    return np.array(classes, dtype=np.int64)


def _representation_task(store: Store, teacher, dataset: str, table: TextTable,
                         config: ProjectConfig, mode: str):
    from kiwb.workers.teachers import teacher_content_hash

    scoring = config.scoring
    key = settings_key({"format": REPRESENTATION_FORMAT, "holds": "representation",
                        "teacher": teacher_content_hash(teacher, store), "data": table.fingerprint,
                        "max_length": scoring.max_length, "shard_size": scoring.shard_size,
                        "mode": mode})
    return ScoreTask(teacher, dataset + REPRESENTATION_SUFFIX, table, key, -(-len(table) // scoring.shard_size),
                     scoring.shard_size)


def register_representations(store: Store, tasks: list) -> None:
    for task in tasks:
        store.register_score_set(task.key, teacher=task.teacher.name, dataset=task.dataset,
                                 num_texts=len(task.table), num_shards=task.num_shards,
                                 meta={"holds": "representation", "data": task.table.fingerprint,
                                       "source": task.table.source, "shard_size": task.shard_size})


# ---- drawing ------------------------------------------------------------------------------


@torch.inference_mode()
def represent_texts(model, tokenizer, texts: list[str], settings: ScoringSettings, device,
                    mode: str, *, on_batch: Callable[[int], None] | None = None,
                    should_stop: Callable[[], bool] | None = None,
                    batch: FittedBatch | None = None) -> dict[str, np.ndarray]:
    """One dropout-off forward per text: its representation (float16) and the class the
    teacher predicts (int16), in input order."""
    encodings = tokenizer(texts, truncation=True,
                          max_length=capped_max_length(tokenizer, settings.max_length))
    rows = [{name: encodings[name][row] for name in encodings.keys()} for row in range(len(texts))]
    progress = ProgressOnce(on_batch)

    def attempt(batch_size: int) -> dict[str, np.ndarray]:
        progress.restart()
        found: dict[str, np.ndarray] = {}
        with RepresentationCapture(model, mode) as capture:
            for batch_rows in length_sorted_batches([len(r["input_ids"]) for r in rows], batch_size):
                if should_stop is not None and should_stop():
                    raise InterruptedError("stopped at a batch boundary")
                inputs = to_device(tokenizer.pad([rows[i] for i in batch_rows], return_tensors="pt"),
                                   device)
                with autocast_context(device, settings.dtype):
                    logits = model(**inputs).logits
                representation = capture.take()
                # a NaN distance would read as the top quantile: that teacher would win
                if not bool(torch.isfinite(logits).all() & torch.isfinite(representation).all()):
                    raise NonFiniteLogits()
                arrays = {"representation": stored(representation),
                          "predicted": logits.argmax(-1).to(torch.int16).cpu().numpy()}
                for name, values in arrays.items():
                    if name not in found:
                        found[name] = np.zeros((len(rows), *values.shape[1:]), dtype=values.dtype)
                    found[name][batch_rows] = values
                progress(len(batch_rows))
        return found

    return (batch or FittedBatch(settings.batch_size)).run(attempt, device, "representing",
                                                           items=len(texts))


def run_representations(config: ProjectConfig, store: Store, tasks: list, *, device,
                        progress: Callable[[str, int], None] | None = None,
                        should_stop: Callable[[], bool] | None = None) -> None:
    """Draw every unfinished shard of the representation `tasks` this process can claim."""
    from kiwb.workers.teachers import load_teacher

    settings = scoring_settings(config, device)
    owner = claim_owner()
    mode = representation_mode(config)
    paths = ProjectPaths(config.root)
    for name in dict.fromkeys(task.teacher.name for task in tasks):
        mine = [task for task in tasks if task.teacher.name == name]
        if all(len(store.done_shards(t.key)) == t.num_shards for t in mine):
            continue
        model, tokenizer = load_teacher(mine[0].teacher, str(device))
        problem = capture_problem(model, mode)
        if problem:
            raise KiwbError(f"teacher {name!r}: cannot keep its representation: {problem}")
        batch = FittedBatch(settings.batch_size)
        for task in mine:
            for shard in range(task.num_shards):
                if shard in store.done_shards(task.key) or not store.claim_shard(task.key, shard, owner):
                    continue
                rows = task.shard_rows(shard)
                started = time.perf_counter()
                try:
                    arrays = represent_texts(
                        model, tokenizer, task.table.texts[rows.start:rows.stop], settings, device,
                        mode, should_stop=should_stop, batch=batch,
                        on_batch=(lambda n, t=task: progress(f"{t.teacher.name} · {t.dataset}", n))
                        if progress else None)
                except NonFiniteLogits:
                    store.release_shard(task.key, shard, owner)
                    raise KiwbError(non_finite_message(task, rows, settings.dtype)) from None
                except BaseException:
                    store.release_shard(task.key, shard, owner)
                    raise
                record_representation(store, paths, task, shard, arrays,
                                      time.perf_counter() - started)
        del model


def record_representation(store: Store, paths: ProjectPaths, task, shard: int,
                          arrays: dict[str, np.ndarray], seconds: float) -> None:
    """Write a representation shard (atomically), then mark it done. Only seen texts keep the
    teacher's predictions: a scored data set has its logits in its score set."""
    rows = task.shard_rows(shard)
    kept = {"representation": arrays["representation"],
            "rows": np.arange(rows.start, rows.stop, dtype=np.int64)}  # what it holds, checked
    if task.dataset == SEEN + REPRESENTATION_SUFFIX:
        kept["predicted"] = arrays["predicted"]
    shard_file = paths.shard_file(task.key, shard)
    recover_interrupted_writes(shard_file.parent, target=shard_file.name)
    size, sha256 = write_shard_file(shard_file, kept)
    store.finish_shard(task.key, shard, rows=len(rows), seconds=seconds, row_start=rows.start,
                       size=size, sha256=sha256)


def load_representation(config: ProjectConfig, store: Store, task) -> dict[str, np.ndarray]:
    """A finished representation set's arrays in row order ("representation"; seen texts also
    "predicted")."""
    done = store.done_shards(task.key)
    if len(done) != task.num_shards:
        raise KiwbError(
            f"teacher {task.teacher.name!r}'s representation of the "
            f"{task.dataset.removesuffix(REPRESENTATION_SUFFIX)} texts is not drawn yet "
            f"({len(done)} of {task.num_shards} parts), and the representation routings read "
            f"it: run {command('score', config.root, '--representations')} (one dropout-off "
            "forward per text, the MC scores kept), or tick representations in the workbench's "
            "Score form")
    parts = [{name: values for name, values in arrays.items() if name != "rows"}
             for arrays in checked_shards(config, store, task)]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def check_seen_classes(config: ProjectConfig, teacher, classes: np.ndarray, *,
                       labeled: bool) -> None:
    """Refuse, in one line, seen texts that leave out some of the teacher's classes: its class
    means would have none there, and texts of those classes would read as foreign to it (a
    seen file of 1 of 4 classes routed 38-54% right)."""
    missing = [label for number, label in enumerate(teacher.labels)
               if not bool((classes == number).any())]
    if missing:
        said = "labels" if labeled else "the teacher's own predictions on them"
        raise DataError(f"{config.file}: the seen texts of teacher {teacher.name!r} hold "
                        f"{len(teacher.labels) - len(missing)} of its {len(teacher.labels)} "
                        f"classes by their {said} ({', '.join(missing)} missing); give seen "
                        "texts of every class, or remove seen")


def seen_references(config: ProjectConfig, store: Store, teachers: list) -> tuple[list, dict]:
    """Per teacher (in order), its seen texts as a routing reference, or None: their
    representations, and their labels (or, without any, the teacher's predictions) as classes;
    and the representation-set keys read, by teacher."""
    from kiwb.core.representation_routing import Reference

    found = seen_tasks(config, store, teachers)
    references = []
    for teacher in teachers:
        if teacher.name not in found:
            references.append(None)
            continue
        task, seen = found[teacher.name]
        arrays = load_representation(config, store, task)
        classes = seen.classes if seen.classes is not None else arrays["predicted"]
        check_seen_classes(config, teacher, classes, labeled=seen.classes is not None)
        references.append(Reference(torch.from_numpy(arrays["representation"]),
                                    torch.from_numpy(classes.astype(np.int64)), "seen"))
    # what an integration read: the seen texts' set, and the labels they were given
    keys = {name: {"texts": task.key, "labels": texts_fingerprint(
        [str(c) for c in seen.classes]) if seen.classes is not None else None}
        for name, (task, seen) in found.items()}
    return references, keys
