"""The teachers' kind of a project, read cheaply from their config.json (no model library),
and what follows from it before any job runs: the kind's defaults where kiwb.toml leaves a key
out, and the integration methods the kind takes. A job, the CLI command that starts it and the
workbench's forms load a project once (`load_project`: its config and its kind) and pass it
down."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiwb.core.choices import SUPERVISED
from kiwb.errors import ConfigError
from kiwb.kinds import TeacherKind, common_kind, declared_kind, kind_named, kind_of_checkpoint
from kiwb.project.config import ProjectConfig, load_config, teacher_model_configs
from kiwb.project.config_schema import IntegrationConfig, TrainingConfig
from kiwb.project.setting_knobs import shown_settings


def project_kind(config: ProjectConfig) -> str:
    """The kind of the project's teachers (kiwb.kinds), read from their config.json; teachers
    of different kinds are refused in one line. A teacher whose config cannot be read counts
    as nothing here: inspecting it says what is wrong. A project whose kiwb.toml declares a kind
    by a table of its own is of that kind, whatever its teachers are ([[tasks]]: multi-task,
    each teacher answering some of the tasks; [embedding]: sentence encoders)."""
    declared = declared_kind(config)
    if declared is not None:
        return declared.name
    kinds = {}
    for teacher, model_config in teacher_model_configs(config):
        found = kind_of_checkpoint(model_config, teacher.problem_type)
        if found is not None:
            kinds[teacher.name] = found[0].name
    try:
        return common_kind(kinds)
    except ValueError as error:
        raise ConfigError(f"{config.file}: {error}") from None


@dataclass(frozen=True)
class LoadedProject:
    """A project as a job (or a form that starts one) reads it, worked out once and passed
    down: its checked config, with its "auto" settings made its teachers' kind's, and that
    kind. Nothing below reads the kind again."""

    config: ProjectConfig
    kind: TeacherKind

    @classmethod
    def of(cls, config: ProjectConfig, kind: TeacherKind | None = None) -> LoadedProject:
        """A read config as its teachers' `kind` reads it (None: read from their config.json,
        once)."""
        kind = kind or kind_named(project_kind(config))
        return cls(config.with_defaults_of(kind), kind)


def load_project(project: Path | str) -> LoadedProject:
    """The project at `project` (its folder or its kiwb.toml): its config read and checked
    once, its teachers' kind read from their config.json once."""
    return LoadedProject.of(load_config(project))


def check_method(config: ProjectConfig, kind: TeacherKind, method: str,
                 routing: str | None = None, settings: Mapping[str, Any] | None = None, *,
                 declared: type = IntegrationConfig) -> None:
    """The method and routing are ones the teachers' kind takes, and no other integration
    setting in `settings` (by name) is one it never applies (its `unused_settings`, or one
    `declared` for other kinds only: Shown.kinds), set away from its default; else one line
    naming what to do. A supervised run reads no integration setting."""
    try:
        kind.check_method(method)
        kind.check_routing(routing)
        if settings is not None and method != SUPERVISED:
            kind.check_settings(settings, dataclasses.asdict(declared()),
                                {**kind.jobs.unused_settings,
                                 **_declared_for_other_kinds(declared, kind)})
    except ValueError as error:
        raise ConfigError(f"{config.file}: {error}") from None


def check_training_overrides(config: ProjectConfig, kind: TeacherKind, given: Mapping[str, Any],
                             *, declared: type = TrainingConfig) -> None:
    """A [training] setting given to a job (`kiwb train --feature-weight`) that is declared for
    other kinds only (Shown.kinds), refused in one line naming the project and the flag."""
    flags = {setting.name: shown.flag.name for setting, shown in shown_settings(declared)}
    for name, why in _declared_for_other_kinds(declared, kind).items():
        if name in given:
            raise ConfigError(f"{config.file}: {flags[name]} does not apply to {kind.title} "
                              f"teachers: {why}; leave it out")


def _declared_for_other_kinds(declared: type, kind: TeacherKind) -> dict[str, str]:
    """The settings `declared` for other kinds only (Shown.kinds) -> why, in words."""
    found = {}
    for setting, shown in shown_settings(declared):
        if shown.kinds is not None and kind.name not in shown.kinds:
            titles = " and ".join(kind_named(each).title for each in shown.kinds)
            found[setting.name] = f"it applies to {titles} teachers only"
    return found
