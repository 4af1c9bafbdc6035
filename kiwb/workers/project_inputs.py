"""Loading what a project's config points at: its data sets and its teachers."""

from __future__ import annotations

from kiwb.project.config import ProjectConfig
from kiwb.workers.data import TextTable, load_table
from kiwb.workers.teachers import TeacherInfo, inspect_teacher

DATASET_ROLES = ("unlabeled", "eval")


def load_dataset_role(config: ProjectConfig, role: str) -> TextTable | None:
    """The project's `unlabeled` or `eval` data set, or None when the config has none."""
    spec = getattr(config.data, role)
    if spec is None:
        return None
    return load_table(
        config.resolve(spec.path, allow_hub_id=False), text_column=spec.text_column, label_column=spec.label_column,
        split=spec.split, limit=spec.limit, role=role,
    )


def load_datasets(config: ProjectConfig) -> dict[str, TextTable]:
    """Every data set the config names, by role."""
    tables = {role: load_dataset_role(config, role) for role in DATASET_ROLES}
    return {role: table for role, table in tables.items() if table is not None}


def inspect_teachers(config: ProjectConfig) -> list[TeacherInfo]:
    """Check every teacher up front, so a bad one fails before any work starts."""
    return [
        inspect_teacher(
            teacher.name, config.resolve(teacher.path),
            list(teacher.labels) if teacher.labels is not None else None,
            teacher.trust_remote_code,
        )
        for teacher in config.teachers
    ]
