"""The work of each job kind, calling the same functions whichever way the job was started.

Each takes a running `JobSession` (its job's typed spec holds the command's options) and
returns an `Outcome`; the session records the lifecycle around it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kiwb.console import console
from kiwb.project.job_specs import ExportSpec, IntegrateSpec, ScoreSpec, TrainSpec
from kiwb.project.paths import ProjectPaths
from kiwb.workers.job import EXIT_CANCELLED, JobSession, Outcome
from kiwb.workers.quiet import quiet_libraries


def score(session: JobSession) -> Outcome:
    quiet_libraries()
    from kiwb.workers.ranks import launched_rank
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.score import run_scoring
    from kiwb.workers.score_job import run_score_job

    spec: ScoreSpec = session.job.spec
    config = session.config()
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

    from kiwb.workers.integrate import IntegrationSettings, run_integration

    spec: IntegrateSpec = session.job.spec
    config = session.config()
    config.require_scoring_inputs()
    settings = IntegrationSettings.from_config(config, **spec.integration_overrides())
    session.started(torch.device("cpu"))  # tensor math over stored scores: no GPU needed
    record = run_integration(config, session.store, settings)
    summary = record.summary
    wins = ", ".join(f"{teacher} won {count:,}" for teacher, count in summary.wins.items())
    given = summary.gold_labels
    labels = (f", {given.labeled:,} labeled texts as targets, {given.left_out:,} left out"
              if given is not None else "")
    console.print(f"Integrated {summary.num_texts:,} texts ({settings.method}, "
                  f"{settings.routing} routing{labels}): {wins}; {summary.conflicts:,} conflicts "
                  f"under margin {summary.conflict_threshold}", highlight=False, soft_wrap=True)
    return Outcome(data={"integration": record.key})


def train(session: JobSession) -> Outcome:
    quiet_libraries()
    from kiwb.workers.integrate import IntegrationSettings
    from kiwb.workers.ranks import launched_rank
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.train import TrainRequest

    spec: TrainSpec = session.job.spec
    config = session.config()
    config = dataclasses.replace(config, training=dataclasses.replace(
        config.training, **spec.overrides("student", "epochs", "min_steps", "device")))
    settings = IntegrationSettings.from_config(config, **spec.integration_overrides())
    request = TrainRequest(run=session.job.run, settings=settings, resume=spec.resume)
    devices = spec.device_list()
    if launched_rank() is not None or (devices and (devices == ["all"] or len(devices) > 1)):
        from kiwb.workers.train_ranks import train_on_ranks

        return train_on_ranks(session, config, settings, request, devices)
    device = resolve_device(devices[0] if devices else config.training.device)
    return train_here(session, config, settings, request, device)


def train_here(session: JobSession, config, settings, request, device) -> Outcome:
    """A training job in this one process, on `device`."""
    from kiwb.workers.train import Trainer, prepare

    session.started(device)
    trainer = Trainer(config, session.store, request, prepare(config, session.store, request),
                      device, job_id=session.job.id)
    return run_trainer(session, trainer, request.run, where=str(device))


def run_trainer(session: JobSession, trainer, run: str, where: str) -> Outcome:
    """Set up a prepared Trainer, train with progress, and say how it ended."""
    from kiwb.core.learning_check import check_of

    settings = trainer.request.settings
    trainer.setup()
    remaining = trainer.total_steps - trainer.step
    console.print(f"Training run [bold]{run}[/bold] ({settings.method}) on {where}: "
                  f"{len(trainer.data.texts):,} texts, {remaining:,} of {trainer.total_steps:,} "
                  "steps to go")
    ranks = trainer.ranks  # on several ranks, each one's share shows in the job's progress
    extra = (lambda: ranks.figures(trainer.step, trainer.training.batch_size)) if ranks else None
    with session.progress(f"train {run}", total=remaining, unit="steps", extra=extra) as advance:
        result = trainer.run(progress=lambda n, loss: advance(f"train {run} · loss {loss:.4f}", n),
                             should_stop=session.should_stop)
    if result["stopped"]:
        console.print(f"Stopped at step {result['step']} of {trainer.total_steps}, checkpointed.")
        return Outcome("cancelled", {"step": result["step"]}, EXIT_CANCELLED)
    best = result["best"] or {}
    if best.get("accuracy") is not None:
        console.print(f"Best eval accuracy {100 * best['accuracy']:.2f}% at step {best['step']}")
    check = check_of(best)  # the verdict on the checkpoint the run keeps
    if check is not None and check.flagged:
        console.print(check.line(f"the student of run {run} (step {best['step']})"),
                      style="bold yellow", highlight=False, markup=False, soft_wrap=True)
        console.print(f"Done, with the warning above. Export it anyway with: "
                      f"kiwb export {session.project_label} --run {run}", highlight=False, markup=False)
    else:
        console.print(f"Done. Export it with: [bold]kiwb export {session.project_label} --run {run}[/bold]")
    return Outcome(data={"step": result["step"], "best": result["best"],
                         "learning_rate": result["learning_rate"], "precision": trainer.autocast_dtype,
                         "check": check.to_dict() if check else None})


def export(session: JobSession) -> Outcome:
    quiet_libraries()
    import torch

    from kiwb.workers.export import export_student

    spec: ExportSpec = session.job.spec
    run = session.job.run
    destination = Path(spec.destination or ProjectPaths(session.root).exports / run)
    session.started(torch.device("cpu"))
    export_student(session.root, run, destination, checkpoint=spec.checkpoint, force=spec.force)
    console.print(f"Exported run {run} to {destination}")
    console.print("Load it with:\n  from transformers import pipeline\n"
                  f"  classify = pipeline(\"text-classification\", model=\"{destination}\")")
    return Outcome(data={"destination": str(destination)})


WORK = {"score": score, "integrate": integrate, "train": train, "export": export}
