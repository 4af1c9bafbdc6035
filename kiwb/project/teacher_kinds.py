"""The teachers' kind of a project, read cheaply from their config.json (no model library),
and what follows from it before any job runs: the kind's defaults where kiwb.toml leaves a key
out, and the integration methods the kind takes. The CLI, the workers and the workbench all
read it here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kiwb.core.choices import AUTO_ROUTING
from kiwb.errors import ConfigError
from kiwb.kinds import common_kind, declared_kind, kind_named, kind_of_checkpoint
from kiwb.project.config import ProjectConfig, teacher_model_configs
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


def with_kind_defaults(config: ProjectConfig, kind: str | None = None) -> ProjectConfig:
    """The config as a job of its teachers' kind reads it: its "auto" settings made the kind's,
    and the kind's method where its own table sets it. `kind`: the teachers' kind when known,
    else read from their config.json (only if needed)."""
    if config.integration.routing != AUTO_ROUTING and declared_kind(config) is None:
        return config
    return config.with_defaults_of(kind_named(kind or project_kind(config)))


def default_routing(config: ProjectConfig, kind: str | None = None) -> str:
    """The routing of the teachers' kind when kiwb.toml sets none (a run's name leaves it out)."""
    return kind_named(kind or project_kind(config)).default_routing


def check_method(config: ProjectConfig, kind: str, method: str, routing: str | None = None,
                 settings: Mapping[str, Any] | None = None, *,
                 declared: type = IntegrationConfig) -> None:
    """The method and routing are ones the teachers' kind takes, and no other integration
    setting in `settings` (by name) is one it never applies (its `unused_settings`, or one
    `declared` for other kinds only: Shown.kinds), set away from its default; else one line
    naming what to do. A supervised run reads no integration setting."""
    described = kind_named(kind)
    try:
        described.check_method(method)
        described.check_routing(routing)
        if settings is not None and method != "supervised":
            described.check_settings(settings, dataclasses.asdict(declared()),
                                     {**described.unused_settings,
                                      **_declared_for_other_kinds(declared, kind)})
    except ValueError as error:
        raise ConfigError(f"{config.file}: {error}") from None


def check_training_overrides(kind: str, given: Mapping[str, Any], *,
                             declared: type = TrainingConfig) -> None:
    """A [training] setting given to a job (`kiwb train --feature-weight`) that is declared for
    other kinds only (Shown.kinds), refused in one line naming its flag."""
    flags = {setting.name: shown.flag.name for setting, shown in shown_settings(declared)}
    for name, why in _declared_for_other_kinds(declared, kind).items():
        if name in given:
            raise ConfigError(f"{flags[name]} does not apply to {kind_named(kind).title} "
                              f"teachers: {why}; leave it out")


def _declared_for_other_kinds(declared: type, kind: str) -> dict[str, str]:
    """The settings `declared` for other kinds only (Shown.kinds) -> why, in words."""
    found = {}
    for setting, shown in shown_settings(declared):
        if shown.kinds is not None and kind not in shown.kinds:
            titles = " and ".join(kind_named(each).title for each in shown.kinds)
            found[setting.name] = f"it applies to {titles} teachers only"
    return found
