"""The training job's work in one process: set up a Trainer, train with progress, and say how
it ended; shared by the one-process path (job_kinds.train) and rank 0 of several
(train_ranks.train_on_ranks)."""

from __future__ import annotations

from kiwb.console import console
from kiwb.shell import command
from kiwb.workers.job import EXIT_CANCELLED, JobSession, Outcome


def train_here(session: JobSession, config, settings, request, device) -> Outcome:
    """A training job in this one process, on `device`."""
    from kiwb.workers.train import Trainer, prepare

    session.started(device)
    trainer = Trainer(config, session.store, request,
                      prepare(config, session.store, request, session.project().kind),
                      device, job_id=session.job.id)
    return run_trainer(session, trainer, request.run, where=str(device))


def run_trainer(session: JobSession, trainer, run: str, where: str) -> Outcome:
    """Set up a prepared Trainer, train with progress, and say how it ended."""
    from kiwb.core.learning_check import check_of
    from kiwb.core.routing_check import RoutingCheck

    settings = trainer.request.settings
    trainer.setup()
    remaining = trainer.total_steps - trainer.step
    console.print(f"Training run [bold]{run}[/bold] ({settings.method}) on {where}: "
                  f"{len(trainer.data.texts):,} texts, {remaining:,} of {trainer.total_steps:,} "
                  "steps to go")
    routing = RoutingCheck.from_dict(trainer.data.manifest.get("routing_check"))
    if routing is not None and routing.flagged:  # said before training, not after an hour
        console.print(routing.line(f"the routing that run {run} trains on"), style="bold yellow",
                      highlight=False, markup=False, soft_wrap=True)
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
        console.print(f"Best eval {trainer.kind.words.best_text(best)} at step {best['step']}")
    check = check_of(best)  # the verdict on the checkpoint the run keeps
    if check is not None and check.flagged:
        # one print: the warning and the line that points at it cannot come apart in a log
        console.print(check.line(f"the student of run {run} (step {best['step']})")
                      + "\nDone, with the warning above. Export it anyway with: "
                      + command("export", session.project_label, "--run", run),
                      style="bold yellow", highlight=False, markup=False, soft_wrap=True)
    else:
        console.print(f"Done. Export it with: [bold]{command('export', session.project_label, '--run', run)}[/bold]")
    return Outcome(data={"step": result["step"], "best": result["best"],
                         "learning_rate": result["learning_rate"], "precision": trainer.autocast_dtype,
                         "check": check.to_dict() if check else None,
                         "routing_check": routing.to_dict() if routing else None})
