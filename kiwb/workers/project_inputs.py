"""Loading what a project's config points at: its data sets and its teachers."""

from __future__ import annotations

from kiwb.errors import DataError, TeacherError
from kiwb.kinds import TeacherKind, declared_kind, kind_named
from kiwb.project.config import ProjectConfig
from kiwb.project.config_schema import DATASET_ROLES
from kiwb.project.teacher_kinds import project_kind
from kiwb.workers.data import TextTable, row_name
from kiwb.workers.kind_runtimes import runtime_of
from kiwb.workers.teachers import TeacherInfo, inspect_teacher


def load_dataset_role(config: ProjectConfig, role: str,
                      kind: TeacherKind | None = None) -> TextTable | None:
    """The project's `unlabeled`, `eval` or `labeled` data set, or None when the config has
    none; a token project's (`kind`, read from the teachers when None) comes with its words."""
    spec = getattr(config.data, role)
    if spec is None:
        return None
    path = config.resolve(spec.path, allow_hub_id=False)
    return runtime_of(kind or kind_named(project_kind(config))).load_table(path, spec, role, config)


def load_datasets(config: ProjectConfig, kind: TeacherKind | None = None) -> dict[str, TextTable]:
    """Every data set the config names, by role."""
    kind = kind or kind_named(project_kind(config))
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
            f"[data.eval] ({evaluation.source}), e.g. {row_name(labeled.source, shared[0] - 1)}: "
            f"{example!r}; evaluation must "
            "not see the labels routing is calibrated on: remove them from one of the two files")


def inspect_teachers(config: ProjectConfig) -> list[TeacherInfo]:
    """Check every teacher up front, so a bad one fails before any work starts. A kind that a
    project declares by a table of its own reads its teachers itself (multi-task: with the heads
    that answer its tasks; embedding: sentence encoders with their pooling)."""
    declared = declared_kind(config)
    own = runtime_of(declared).inspect_teachers(config) if declared is not None else None
    if own is not None:
        return own
    found = [
        inspect_teacher(
            teacher.name, config.resolve(teacher.path),
            list(teacher.labels) if teacher.labels is not None else None,
            teacher.trust_remote_code, teacher.tag_scheme,
            list(teacher.types) if teacher.types is not None else None,
            teacher.problem_type,
        )
        for teacher in config.teachers
    ]
    for info in found:  # a kind read from its table (multi-task's [[tasks]]) that is missing
        if (refusal := kind_named(info.kind).jobs.undeclared_refusal) is not None:
            raise TeacherError(f"teacher {info.name!r} {refusal}")
    return found

