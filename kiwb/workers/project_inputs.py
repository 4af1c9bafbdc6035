"""Loading what a project's config points at: its data sets and its teachers."""

from __future__ import annotations

import json
from pathlib import Path

from kiwb.errors import ConfigError, DataError, KiwbError
from kiwb.kinds import common_kind, kind_named, kind_of_checkpoint, run_seam
from kiwb.project.config import ProjectConfig, load_config
from kiwb.project.job_specs import IntegrateSpec, JobSpec, TrainSpec
from kiwb.workers.data import TextTable
from kiwb.workers.teachers import TeacherInfo, inspect_teacher, resolve_checkpoint

DATASET_ROLES = ("unlabeled", "eval", "labeled")


def load_dataset_role(config: ProjectConfig, role: str,
                      kind: str | None = None) -> TextTable | None:
    """The project's `unlabeled`, `eval` or `labeled` data set, or None when the config has
    none; a token project's (`kind`, read from the teachers when None) comes with its words."""
    spec = getattr(config.data, role)
    if spec is None:
        return None
    path = config.resolve(spec.path, allow_hub_id=False)
    return run_seam(kind or project_kind(config), "load_table", path, spec, role)


def project_kind(config: ProjectConfig) -> str:
    """The kind of the project's teachers (kiwb.kinds), read from their config.json; teachers
    of different kinds are refused in one line. A teacher whose config cannot be read counts
    as nothing here: inspecting it says what is wrong."""
    kinds = {}
    for teacher in config.teachers:
        try:
            folder = resolve_checkpoint(teacher.name, config.resolve(teacher.path))
            model_config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (KiwbError, OSError, ValueError):
            continue
        found = kind_of_checkpoint(model_config, teacher.problem_type)
        if found is not None:
            kinds[teacher.name] = found[0].name
    try:
        return common_kind(kinds)
    except ValueError as error:
        raise ConfigError(f"{config.file}: {error}") from None


def load_datasets(config: ProjectConfig, kind: str | None = None) -> dict[str, TextTable]:
    """Every data set the config names, by role."""
    kind = kind or project_kind(config)
    tables = {role: load_dataset_role(config, role, kind) for role in DATASET_ROLES}
    tables = {role: table for role, table in tables.items() if table is not None}
    if "labeled" in tables and "eval" in tables:
        refuse_overlap(tables["labeled"], tables["eval"], config)
    return tables


def refuse_overlap(labeled: TextTable, evaluation: TextTable, config: ProjectConfig) -> None:
    """Evaluation must never see the texts routing was calibrated on: refuse shared texts."""
    from kiwb.project.labels import text_hash

    eval_hashes = {text_hash(text) for text in evaluation.texts}
    shared = [number for number, text in enumerate(labeled.texts, start=1)
              if text_hash(text) in eval_hashes]
    if shared:
        example = labeled.texts[shared[0] - 1]
        example = example if len(example) <= 50 else example[:47] + "..."
        raise DataError(
            f"{config.file}: {len(shared):,} text(s) of [data.labeled] ({labeled.source}) are also in "
            f"[data.eval] ({evaluation.source}), e.g. row {shared[0]}: {example!r}; evaluation must "
            "not see the labels routing is calibrated on: remove them from one of the two files")


def inspect_teachers(config: ProjectConfig) -> list[TeacherInfo]:
    """Check every teacher up front, so a bad one fails before any work starts."""
    return [
        inspect_teacher(
            teacher.name, config.resolve(teacher.path),
            list(teacher.labels) if teacher.labels is not None else None,
            teacher.trust_remote_code, teacher.tag_scheme,
            list(teacher.types) if teacher.types is not None else None,
            teacher.problem_type,
        )
        for teacher in config.teachers
    ]


def check_method(config: ProjectConfig, kind: str, method: str) -> None:
    """The method is one the teachers' kind takes; else one line naming the kind's."""
    try:
        kind_named(kind).check_method(method)
    except ValueError as error:
        raise ConfigError(f"{config.file}: {error}") from None


def check_before_recording(spec: JobSpec, config_file: Path) -> None:
    """Refuse, before a job is recorded, what no worker could run: a misspelt device, or an
    integrate or train job whose method (given, or the project's [integration] method) the
    teachers' kind does not take; a refused job leaves no row. A project that cannot be read
    here is left to the job, which records why."""
    spec.check()
    if not isinstance(spec, (IntegrateSpec, TrainSpec)):
        return
    try:
        config = load_config(config_file)
        kind = project_kind(config)
    except KiwbError:
        return
    check_method(config, kind, spec.method or config.integration.method)
