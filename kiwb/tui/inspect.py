"""What the Teachers and Data panes show, read cheaply from files (no transformers, no datasets).

A teacher's labels, architecture and tokenizer come from its config.json, tokenizer.json
and tokenizer_config.json, its size from os.stat; a data file's rows, columns and samples
come from reading it with the standard library (pyarrow for parquet). The checks mirror the
ones `kiwb score` makes, so a problem shows in the workbench before a job is launched.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kiwb.kinds import (
    DEFAULT_KIND,
    KINDS,
    declared_kind,
    head_kind,
    kind_of_checkpoint,
    unmatched_checkpoint,
)
from kiwb.project.config import DatasetConfig, ProjectConfig, TeacherConfig, checkpoint_folder
from kiwb.project.config_schema import hub_dataset
from kiwb.project.dropout_rates import dropout_line
from kiwb.project.padding import unpaddable_problem
from kiwb.project.teach_report import untrained_teacher_problem

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".h5", ".msgpack", ".gguf")
SAMPLE_ROWS = 3
STOP_CHECK_ROWS = 65536
_GENERIC_LABEL = re.compile(r"^LABEL_\d+$")


@dataclass(frozen=True)
class TeacherSummary:
    """A teacher as its files describe it, and the problem that stops it, if any."""

    name: str
    path: str
    labels: tuple[str, ...] = ()  # its labels, or (token) its entity types
    architecture: str = ""
    kind: str = DEFAULT_KIND  # kiwb.kinds: sequence or token
    scheme: str | None = None  # token: how its tags mark entities
    model_type: str = ""
    tokenizer: str = ""
    size_bytes: int | None = None
    problem: str | None = None
    tasks: tuple[str, ...] = ()  # a multi-task project's: the tasks it answers (kiwb.toml)
    seen: str | None = None  # kiwb.toml's file of its training texts (representation routings)
    dropout: str | None = None  # what its config.json's dropout rates mean for its MC passes


def union_with_overlaps(label_sets: list[tuple[str, ...]]) -> list[tuple[str, int]]:
    """The union labels in first-appearance order, each with how many teachers have it."""
    counts: Counter[str] = Counter()
    for labels in label_sets:
        counts.update(set(labels))
    ordered = dict.fromkeys(label for labels in label_sets for label in labels)
    return [(label, counts[label]) for label in ordered]


def inspect_teacher(config: ProjectConfig, teacher: TeacherConfig) -> TeacherSummary:
    """Read a teacher's config.json, tokenizer_config.json and file sizes."""
    base = TeacherSummary(teacher.name, teacher.path, tasks=tuple(teacher.tasks or ()),
                          seen=teacher.seen)
    folder = checkpoint_folder(config, teacher.path)
    if folder is None:
        return replace(base, problem=f"{teacher.path} is a hub id not downloaded on this machine; "
                        "download it where there is internet and set path to the folder")
    try:
        model_config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return replace(base, problem=f"{folder} has no config.json, so it is not a Hugging Face "
                        "checkpoint; pick a folder written by save_pretrained")
    except (OSError, ValueError) as error:
        return replace(base, problem=f"cannot read {folder}/config.json: {error}")
    architectures = list(model_config.get("architectures") or [])
    found = kind_of_checkpoint(model_config, teacher.problem_type)
    kind, architecture = found if found is not None else (KINDS[DEFAULT_KIND], "")
    summary = replace(base, architecture=architecture or ", ".join(architectures),
                      model_type=str(model_config.get("model_type", "")),
                      tokenizer=_tokenizer_name(folder), size_bytes=_weights_size(folder),
                      kind=kind.name,
                      dropout=dropout_line(model_config, config.scoring.dropout))
    declared = declared_kind(config)  # a kind that reads checkpoints its own way (encoders)
    facts = None if declared is None else declared.checkpoints.checkpoint_facts(
        model_config, folder, teacher, head_kind(architectures, model_config.get("problem_type")))
    if facts is not None:
        labels, problem = facts
        return replace(summary, kind=declared.name, labels=labels,
                       architecture=architectures[0] if architectures else summary.architecture,
                       problem=f"{folder} {problem}" if problem else None)
    if kind.checkpoints.override_key == "labels":
        labels, problem, scheme = *_labels(model_config, teacher), None
    else:
        labels, problem, scheme = _knowledge(kind, model_config, teacher)
    if not architecture:
        problem = unmatched_checkpoint(model_config, teacher.problem_type)
    problem = (problem or untrained_teacher_problem(teacher.name, folder)
               or unpaddable_problem(teacher.name, folder))
    return replace(summary, labels=labels, problem=problem, scheme=scheme)


def _knowledge(kind, model_config: dict, teacher: TeacherConfig):
    """A token teacher's entity types and tag scheme, or its tags and what is wrong with them."""
    id2label = model_config.get("id2label") or {}
    count = int(model_config.get("num_labels") or len(id2label) or 0)
    outputs = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(count)]
    if teacher.labels is not None:
        return tuple(outputs), ("labels = [...] names a sequence classifier's labels; rename this "
                                "NER teacher's entity types with types = [...]"), None
    try:
        knowledge = kind.checkpoints.read_teacher(outputs, teacher.types, teacher.tag_scheme)
    except ValueError as error:
        return tuple(outputs), str(error), None
    return knowledge.classes, None, knowledge.scheme


def refuse_mixed_kinds(summaries: list[TeacherSummary],
                       multi_task: bool = False) -> list[TeacherSummary]:
    """Teachers of a kind other than the first's are marked with the problem kiwb refuses
    (a multi-task project's teachers answer tasks of different kinds: none is refused)."""
    usable = [summary for summary in summaries if summary.problem is None]
    if multi_task or len({summary.kind for summary in usable}) < 2:
        return summaries
    first = usable[0].kind
    return [replace(summary, problem=f"a {summary.kind} teacher among {first} teachers: kiwb "
                    "integrates teachers of one kind; remove one kind")
            if summary.problem is None and summary.kind != first else summary
            for summary in summaries]


def _labels(model_config: dict, teacher: TeacherConfig) -> tuple[tuple[str, ...], str | None]:
    id2label = model_config.get("id2label") or {}
    count = int(model_config.get("num_labels") or len(id2label) or 0)
    if teacher.labels is not None:
        labels = tuple(teacher.labels)
        if count and len(labels) != count:
            return labels, (f"labels override lists {len(labels)} names but the checkpoint has "
                            f"{count} outputs; list exactly {count}")
        return labels, None
    labels = tuple(str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(count))
    if count < 2:
        return labels, f"has {count} label(s); a teacher needs two or more"
    generic = [label for label in labels if _GENERIC_LABEL.match(label)]
    if generic:
        return labels, (f"names its labels generically ({', '.join(generic)}); give the real "
                        "names with e (override labels)")
    return labels, None


def _tokenizer_name(folder: Path) -> str:
    """What tells tokenizers apart: a fast tokenizer's model and vocabulary size, from its
    tokenizer.json (transformers 5 names every fast tokenizer's class TokenizersBackend), else
    the class its tokenizer_config.json names."""
    described = _fast_tokenizer(folder / "tokenizer.json")
    if described is not None:
        return described
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "tokenizer.json" if (folder / "tokenizer.json").is_file() else "none found"
    return str(tokenizer_config.get("tokenizer_class") or "unnamed")


def _fast_tokenizer(path: Path) -> str | None:
    """"WordPiece 30,522": the model of a tokenizer.json and its vocabulary size (its highest
    token id + 1, added tokens included); None where there is no readable one."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        model = found["model"]
        vocab = model["vocab"]
        ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
        ids += [int(token["id"]) for token in found.get("added_tokens") or ()]
        return f"{model['type']} {max(ids) + 1:,}" if ids else str(model["type"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _weights_size(folder: Path) -> int | None:
    sizes = [entry.stat().st_size for entry in os.scandir(folder)
             if entry.is_file() and entry.name.endswith(WEIGHT_SUFFIXES)]
    return sum(sizes) if sizes else None


def human_size(size: int | None) -> str:
    if size is None:
        return "–"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


# -- data sets ------------------------------------------------------------------------------

@dataclass(frozen=True)
class DatasetSummary:
    """A data file as read directly: format, rows, columns, a few samples, label counts."""

    role: str
    path: str
    text_column: str
    label_column: str | None
    format: str = ""
    rows: int | None = None
    columns: list[str] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    label_counts: dict[str, int] = field(default_factory=dict)
    problem: str | None = None


def inspect_dataset(config: ProjectConfig, role: str, spec: DatasetConfig,
                    should_stop: Callable[[], bool] = lambda: False) -> DatasetSummary:
    """Rows, columns and sample rows of one data set; problems named with their fix.

    Counting the rows of a big text file takes a while: `should_stop` ends it early.
    """
    base = DatasetSummary(role, spec.path, spec.text_column, spec.label_column)
    if hub_dataset(spec.path) is not None:  # not fetched from here: a job reads (and caches) it
        shown = ", ".join(f"{key} {value}" for key, value in (("subset", spec.subset),
                                                              ("split", spec.split)) if value)
        return replace(base, format=f"Hub data set{f' ({shown})' if shown else ''}, read by "
                       "the jobs through datasets")
    location = Path(config.resolve(spec.path, allow_hub_id=False))
    try:
        summary = _read(location, base, should_stop)
    except InterruptedError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, csv.Error) as error:
        return replace(base, problem=f"cannot read {location}: {error}")
    if summary.problem:
        return summary
    missing = [column for column in (spec.text_column, spec.label_column)
               if column and summary.columns and column not in summary.columns]
    if missing:
        key = "text_column" if missing[0] == spec.text_column else "label_column"
        return replace(summary, problem=(
            f"no column {missing[0]!r} (columns: {', '.join(summary.columns)}); set {key}"))
    if spec.limit is not None and summary.rows is not None:
        summary = replace(summary, rows=min(summary.rows, spec.limit))
    return summary


def _read(location: Path, base: DatasetSummary, should_stop: Callable[[], bool]) -> DatasetSummary:
    suffix = location.suffix.lower()
    if location.is_dir():
        return replace(base, format="datasets folder", columns=[],
                             rows=_saved_rows(location))
    readers = {".csv": _read_csv, ".tsv": _read_csv, ".jsonl": _read_jsonl, ".json": _read_json,
               ".parquet": _read_parquet}
    if suffix not in readers:
        return replace(base, problem=f"unknown data format {suffix!r}; use .csv, .tsv, "
                             ".jsonl, .json, .parquet or a folder saved with save_to_disk")
    return readers[suffix](location, base, should_stop)


def _counting(base: DatasetSummary, rows, should_stop: Callable[[], bool]) -> DatasetSummary:
    """Count rows from an iterator of dicts, keeping samples and label counts."""
    samples, labels, total, columns = [], Counter(), 0, []
    for row in rows:
        if total % STOP_CHECK_ROWS == 0 and should_stop():
            raise InterruptedError("reading the data was stopped")
        if total == 0:
            columns = list(row)
        if total < SAMPLE_ROWS:
            samples.append(row)
        if base.label_column and base.label_column in row:
            labels[str(row[base.label_column])] += 1
        total += 1
    return replace(base, rows=total, columns=columns, samples=samples,
                         label_counts=dict(labels))


def _read_csv(location: Path, base: DatasetSummary, should_stop) -> DatasetSummary:
    delimiter = "\t" if location.suffix.lower() == ".tsv" else ","
    with open(location, encoding="utf-8", newline="") as handle:
        summary = _counting(base, csv.DictReader(handle, delimiter=delimiter), should_stop)
    return replace(summary, format=location.suffix.lower()[1:])


def _read_jsonl(location: Path, base: DatasetSummary, should_stop) -> DatasetSummary:
    with open(location, encoding="utf-8") as handle:
        summary = _counting(base, (json.loads(line) for line in handle if line.strip()), should_stop)
    return replace(summary, format="jsonl")


def _read_json(location: Path, base: DatasetSummary, should_stop) -> DatasetSummary:
    with open(location, encoding="utf-8") as handle:
        text = handle.read()
    try:
        data = json.loads(text)
    except ValueError:  # datasets also reads JSON Lines from a .json file
        return replace(_read_jsonl(location, base, should_stop), format="json lines")
    if isinstance(data, dict):  # {"data": [...]}: the list of records under one key
        data = next((value for value in data.values() if isinstance(value, list)), [])
    rows = (row for row in data if isinstance(row, dict))
    return replace(_counting(base, rows, should_stop), format="json")


def _read_parquet(location: Path, base: DatasetSummary, _should_stop) -> DatasetSummary:
    import pyarrow.parquet as parquet

    file = parquet.ParquetFile(location)
    first = next(file.iter_batches(batch_size=SAMPLE_ROWS), None)
    samples = first.to_pylist() if first is not None else []
    return replace(base, format="parquet", rows=file.metadata.num_rows,
                         columns=list(file.schema_arrow.names), samples=samples[:SAMPLE_ROWS])


def _saved_rows(folder: Path) -> int | None:
    """Rows of a save_to_disk folder from its state.json and arrow files, when cheap to tell."""
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        import pyarrow as arrow

        total = 0
        for data_file in state["_data_files"]:
            with arrow.memory_map(str(folder / data_file["filename"])) as source:
                total += arrow.ipc.open_stream(source).read_all().num_rows
        return total
    except Exception:  # a DatasetDict folder or an unusual layout: the count is only a nicety
        return None
