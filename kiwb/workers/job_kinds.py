"""The work of each job kind, calling the same functions whichever way the job was started.

Each takes a running `JobSession` (its job's typed spec holds the command's options) and
returns an `Outcome`; the session records the lifecycle around it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kiwb.console import console
from kiwb.errors import ConfigError
from kiwb.kinds import DEFAULT_KIND, kind_named
from kiwb.project.job_specs import ExportSpec, IntegrateSpec, ScoreSpec, TrainSpec
from kiwb.project.paths import ProjectPaths
from kiwb.workers.job import JobSession, Outcome
from kiwb.workers.quiet import quiet_libraries


def score(session: JobSession) -> Outcome:
    quiet_libraries()
    from kiwb.workers.ranks import launched_rank
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.score import run_scoring
    from kiwb.workers.score_job import run_score_job

    spec: ScoreSpec = session.job.spec
    config = session.project().config
    config = dataclasses.replace(config, scoring=dataclasses.replace(
        config.scoring, **spec.overrides("device", "batch_size")))
    devices = spec.device_list()
    if launched_rank() is not None or (devices and (devices == ["all"] or len(devices) > 1)):
        from kiwb.workers.score_ranks import score_on_ranks

        return score_on_ranks(session, config, devices)
    device = resolve_device(devices[0] if devices else config.scoring.device)
    session.started(device)

    def score_all(tasks, advance) -> tuple[int, int] | None:
        if advance is None:
            return None
        if config.scoring.mc_passes == "auto":
            from kiwb.workers.adaptive_scoring import run_adaptive_scoring

            return run_adaptive_scoring(config, session.store, tasks, device=device,
                                        progress=advance, should_stop=session.should_stop,
                                        job_id=session.job.id)
        run_scoring(config, session.store, tasks, device=device, progress=advance,
                    should_stop=session.should_stop, job_id=session.job.id)
        return None

    return run_score_job(session, config, device, str(device), score_all)


def integrate(session: JobSession) -> Outcome:
    quiet_libraries()
    import torch

    from kiwb.project.records import IntegrationSettings
    from kiwb.workers.integrate import run_integration

    spec: IntegrateSpec = session.job.spec
    project = session.project()
    config = project.config
    config.require_scoring_inputs()
    settings = IntegrationSettings.from_project(project, **spec.integration_overrides())
    session.started(torch.device("cpu"))  # tensor math over stored scores: no GPU needed
    record = run_integration(project, session.store, settings)
    summary = record.summary
    wins = ", ".join(f"{teacher} won {count:,}" for teacher, count in summary.wins.items())
    given = summary.gold_labels
    labels = (f", {given.labeled:,} labeled texts as targets, {given.left_out:,} left out"
              if given is not None else "")
    line = project.kind.words.integrated_line(summary)
    routing = summary.routing.name if summary.routing is not None else settings.routing
    console.print(line or (
        f"Integrated {summary.num_texts:,} {project.kind.words.units} "
        f"({settings.method}, {routing} routing{labels}): {wins}; "
        f"{summary.conflicts:,} conflicts under margin {summary.conflict_threshold}"),
        highlight=False, soft_wrap=True)
    if summary.routing_choice is not None:  # routing = "auto": what it chose, and why
        console.print(f"Routing: {summary.routing_choice.line()}", highlight=False,
                      markup=False, soft_wrap=True)
    check = summary.check
    if check is not None and check.flagged:
        console.print(check.line(), style="bold yellow", highlight=False, markup=False,
                      soft_wrap=True)
    return Outcome(data={"integration": record.key,
                         "routing_check": check.to_dict() if check is not None else None})


def train(session: JobSession) -> Outcome:
    quiet_libraries()
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.tracker_check import tracker_problem
    from kiwb.workers.ranks import launched_rank
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.training_data import TrainRequest

    spec: TrainSpec = session.job.spec
    project = session.project()
    config = dataclasses.replace(project.config, training=dataclasses.replace(
        project.config.training, **spec.training_overrides()))
    problem = tracker_problem(config.training.report_to, str(config.file))
    if problem:  # kiwb.toml changed since the job was recorded: refused before training
        raise ConfigError(problem)
    settings = IntegrationSettings.from_project(project, **spec.integration_overrides())
    request = TrainRequest(run=session.job.run, settings=settings, resume=spec.resume,
                           init_from_merge=spec.init_from_merge)
    devices = spec.device_list()
    if launched_rank() is not None or (devices and (devices == ["all"] or len(devices) > 1)):
        from kiwb.workers.train_ranks import train_on_ranks

        return train_on_ranks(session, config, settings, request, devices)
    from kiwb.workers.train_job import train_here

    device = resolve_device(devices[0] if devices else config.training.device)
    return train_here(session, config, settings, request, device)


def export(session: JobSession) -> Outcome:
    quiet_libraries()
    import torch

    from kiwb.workers.export import export_student, read_export_manifest

    spec: ExportSpec = session.job.spec
    run = session.job.run
    destination = Path(spec.destination or ProjectPaths(session.root).exports / run)
    session.started(torch.device("cpu"))
    export_student(session.root, run, destination, checkpoint=spec.checkpoint, force=spec.force)
    console.print(f"Exported run {run} to {destination}")
    kind = read_export_manifest(destination).get("kind", DEFAULT_KIND)
    card = kind_named(kind).words.card
    if "pipeline" in card:
        load = card["pipeline"].replace("PATH/TO/THIS/FOLDER", str(destination))
        console.print(f"Load it with:\n  from transformers import pipeline\n  {load}",
                      highlight=False, markup=False)
    else:  # a kind no pipeline reads whole (multi-task): the model card has its lines
        console.print(f"Use it as its model card says: {destination / 'README.md'} (## Use)",
                      highlight=False, markup=False)
    if spec.push_to_hub is None:
        return Outcome(data={"destination": str(destination)})
    from kiwb.workers.hub_upload import push_folder

    console.print(f"Uploading {destination} to {spec.push_to_hub} on the Hub", highlight=False)
    commit = push_folder(destination, spec.push_to_hub, private=spec.private, run=run)
    console.print(f"Uploaded: {commit}", highlight=False, markup=False)
    return Outcome(data={"destination": str(destination), "hub": commit})


def merge(session: JobSession) -> Outcome:
    quiet_libraries()
    from kiwb.workers.merge_job import run_merge

    return run_merge(session)


WORK = {"score": score, "integrate": integrate, "train": train, "export": export,
        "merge": merge}
