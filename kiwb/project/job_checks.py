"""What is checked of a job before it is recorded (by the CLI, the workbench's launcher and
the worker alike): what no worker could run is refused in one line and leaves no row."""

from __future__ import annotations

from pathlib import Path

from kiwb.errors import ConfigError
from kiwb.project.job_specs import IntegrateSpec, JobSpec, MergeSpec, TrainSpec, student_missing
from kiwb.project.teacher_kinds import (
    LoadedProject,
    check_method,
    check_training_overrides,
    load_project,
)


def check_before_recording(spec: JobSpec, config_file: Path) -> LoadedProject | None:
    """Refuse, before a job is recorded, what no worker could run: a misspelt device, or an
    integrate or train job whose method (given, or the project's [integration] method) the
    teachers' kind does not take, a train job given a [training] setting its kind never applies
    (--feature-weight outside multi-task projects) or no student base to start from, reporting
    to a tracker not installed, or resuming with other settings; a refused job leaves no row. A project that cannot be read
    here is left to the job, which records why. Returns the project as read here (None where
    the job kind reads none), for a job run in this process to go on with."""
    spec.check()
    if isinstance(spec, MergeSpec):
        from kiwb.project.merge_check import check_mergeable

        project = load_project(config_file)
        check_mergeable(project.config, spec, project.kind)
        return project
    if not isinstance(spec, (IntegrateSpec, TrainSpec)):
        return None
    try:
        project = load_project(config_file)
    except ConfigError:
        return None
    config, kind = project.config, project.kind
    check_method(config, kind, spec.method or config.integration.method,
                 routing=spec.routing or config.integration.routing,
                 settings=spec.resolved(config.integration))
    check_training_overrides(config, kind, spec.training_overrides())
    if isinstance(spec, TrainSpec) and spec.init_from_merge:
        from kiwb.project.merge_check import check_merge_start

        check_merge_start(config, spec.init_from_merge)
    if isinstance(spec, TrainSpec) and not (spec.student or config.training.student):
        raise ConfigError(student_missing(config))  # no base to start from: no job to fail
    if isinstance(spec, TrainSpec):  # a tracker's package missing: now, not after training
        from kiwb.project.tracker_check import tracker_problem

        problem = tracker_problem(config.training.report_to, str(config.file))
        if problem:
            raise ConfigError(problem)
        if spec.resume and spec.run:
            check_resume_settings(project, spec)
    return project


def check_resume_settings(project: LoadedProject, spec: TrainSpec) -> None:
    """A resume with other settings than the run started with, refused before its job is
    recorded (a detached one would fail only once running): the settings known now, compared
    as the worker compares them (kiwb.project.resume_checks)."""
    import dataclasses

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.resume_checks import check_resumable, read_manifest

    run_dir = ProjectPaths(project.config.root).run_dir(spec.run)
    if read_manifest(run_dir) is None:  # nothing to resume yet: the job starts it afresh
        return
    training = dataclasses.replace(project.config.training, **spec.training_overrides())
    settings = IntegrationSettings.from_project(project, **spec.integration_overrides())
    check_resumable(run_dir, {"method": settings.pinned(), "training": training.manifest(),
                              "student": training.student, "init_from_merge": spec.init_from_merge},
                    keys=("method", "training", "student"))
