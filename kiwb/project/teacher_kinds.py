"""The teachers' kind of a project, read cheaply from their config.json (no model library),
and what follows from it before any job runs: the kind's defaults where kiwb.toml leaves a key
out, and the integration methods the kind takes. The CLI, the workers and the workbench all
read it here."""

from __future__ import annotations

from pathlib import Path

from kiwb.core.choices import AUTO_ROUTING
from kiwb.errors import ConfigError
from kiwb.kinds import common_kind, declared_kind, kind_named, kind_of_checkpoint
from kiwb.project.config import ProjectConfig, load_config, teacher_model_configs
from kiwb.project.job_specs import IntegrateSpec, JobSpec, MergeSpec, TrainSpec


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


def check_method(config: ProjectConfig, kind: str, method: str,
                 transfer: bool | None = None, routing: str | None = None) -> None:
    """The method (and transfer, and routing) is one the teachers' kind takes; else one line
    naming the kind's."""
    try:
        kind_named(kind).check_method(method)
        kind_named(kind).check_transfer(transfer)
        kind_named(kind).check_routing(routing)
    except ValueError as error:
        raise ConfigError(f"{config.file}: {error}") from None


def check_before_recording(spec: JobSpec, config_file: Path) -> None:
    """Refuse, before a job is recorded, what no worker could run: a misspelt device, or an
    integrate or train job whose method (given, or the project's [integration] method) the
    teachers' kind does not take, or a train job reporting to a tracker not installed; a
    refused job leaves no row. A project that cannot be read
    here is left to the job, which records why."""
    spec.check()
    if isinstance(spec, MergeSpec):
        from kiwb.project.merge_check import check_mergeable

        config = load_config(config_file)
        check_mergeable(config, spec, project_kind(config))
        return
    if not isinstance(spec, (IntegrateSpec, TrainSpec)):
        return
    try:
        config = load_config(config_file)
        kind = project_kind(config)
    except ConfigError:
        return
    routing = getattr(spec, "routing", None) or config.integration.routing
    check_method(config, kind, spec.method or kind_named(kind).configured_method(config),
                 routing=routing)
    if isinstance(spec, TrainSpec) and spec.init_from_merge:
        from kiwb.project.merge_check import check_merge_start

        check_merge_start(config, spec.init_from_merge)
    if isinstance(spec, TrainSpec):  # a tracker's package missing: now, not after training
        from kiwb.project.tracker_check import tracker_problem

        problem = tracker_problem(config.training.report_to, str(config.file))
        if problem:
            raise ConfigError(problem)
        if spec.resume and spec.run:
            check_resume_settings(config, spec)


def check_resume_settings(config: ProjectConfig, spec: TrainSpec) -> None:
    """A resume with other settings than the run started with, refused before its job is
    recorded (a detached one would fail only once running): the settings known now, compared
    as the worker compares them (kiwb.project.resume_checks)."""
    import dataclasses

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.resume_checks import check_resumable, read_manifest

    run_dir = ProjectPaths(config.root).run_dir(spec.run)
    if read_manifest(run_dir) is None:  # nothing to resume yet: the job starts it afresh
        return
    config = with_kind_defaults(config)
    training = dataclasses.replace(config.training, **spec.overrides(
        "student", "epochs", "min_steps", "device", "feature_weight"))
    settings = IntegrationSettings.from_config(config, **spec.integration_overrides())
    check_resumable(run_dir, {"method": settings.pinned(), "training": training.manifest(),
                              "student": training.student, "init_from_merge": spec.init_from_merge},
                    keys=("method", "training", "student"))
