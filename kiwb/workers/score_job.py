"""What a score job does around the scoring itself, on one process or several: plan the score
sets, say what is left, score it, and say how it ended."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kiwb.console import console
from kiwb.core.adaptive_passes import FIRST_PASSES
from kiwb.project.config import ProjectConfig
from kiwb.shell import command
from kiwb.workers.job import JobSession, Outcome
from kiwb.workers.representation_sets import (
    register_representations,
    representations_wanted,
    run_representations,
    seen_tasks,
)
from kiwb.workers.runtime import scoring_precision_for
from kiwb.workers.score import (
    ScoreTask,
    pending_texts,
    plan_scoring,
    register_tasks,
    score_job_summary,
)
from kiwb.workers.shard_checks import set_aside_damaged

# (the tasks, the progress callback or None when nothing is left to score); adaptive scoring
# returns (passes drawn, passes K = max would draw)
ScoreAll = Callable[[list[ScoreTask], Callable[[str, int], None] | None], tuple[int, int] | None]


def run_score_job(session: JobSession, config: ProjectConfig, device, where: str,
                  score_all: ScoreAll, extra: Callable[[], dict[str, Any]] | None = None) -> Outcome:
    """Plan, then `score_all` what is pending on `where` (a device, or the ranks), then the
    outcome: finished, or a partial one when another process still holds some shards."""
    store = session.store
    _, note = scoring_precision_for(config.scoring.dtype, device)
    if note is not None:  # once, before planning: the precision is part of the score sets' keys
        console.print(note, highlight=False, markup=False, soft_wrap=True)
    tasks = plan_scoring(config, store, device, kind=session.project().kind)
    # Drawn on their own (one forward per text) only where they are asked for: a fresh shard
    # keeps its representation from its own dropout-off forward either way.
    asked = bool(getattr(session.job.spec, "representations", False))
    representations = (representation_tasks(config, store, tasks)
                       if asked or representations_wanted(config) else [])
    register_tasks(store, tasks)
    register_representations(store, representations)
    # what is cached must be what was written: a damaged shard is named and scored again
    linked = [task.representation for task in tasks if task.representation is not None]
    checked = {task.key: task for task in (*tasks, *representations, *linked)}
    set_aside_damaged(store, config.root, list(checked.values()),
                      lambda line: console.print(line, style="yellow", highlight=False,
                                                 markup=False, soft_wrap=True))
    todo = pending_texts(store, tasks)
    if todo == 0:
        score_all(tasks, None)  # ranks still wait to be told there is nothing to do
        if not pending_texts(store, representations):
            console.print("All scores are up to date (cached); nothing to do.")
            return Outcome(data=score_job_summary(0, config.scoring, device).to_dict())
        add_representations(session, config, device, representations, extra)
        console.print(f"Done. Next: [bold]{command('integrate', session.project_label)}[/bold]")
        return Outcome(data=score_job_summary(0, config.scoring, device).to_dict())
    scoring = config.scoring
    if scoring.mc_passes == "auto":  # progress in passes: drawn, or found not needed
        console.print(f"Scoring {todo:,} text×teacher pairs on {where} (K = auto: "
                      f"{min(FIRST_PASSES, scoring.max_mc_passes)} MC-dropout passes each, then "
                      f"more where the routing is undecided, up to {scoring.max_mc_passes})",
                      highlight=False)
        total, unit = todo * scoring.max_mc_passes, "passes"
    else:
        keeping = ("; each teacher's representation is kept too"
                   if any(t.representation is not None for t in tasks) else "")
        console.print(f"Scoring {todo:,} text×teacher pairs on {where} "
                      f"(K = {scoring.mc_passes} MC-dropout passes each{keeping})", highlight=False)
        # pairs, as the line above says: a Jobs row of "480/3,200 texts" beside a score set's
        # "512/1,200 texts" read as two counts of the same thing
        total, unit = todo, "pairs"
    with session.progress("scoring", total=total, unit=unit, extra=extra) as advance:
        passes = score_all(tasks, advance)
    add_representations(session, config, device, representations, extra)
    left = pending_texts(store, tasks)
    if left:
        console.print(f"{left:,} pairs are being scored by another process; run again to finish.")
        return Outcome(data=score_job_summary(todo - left, scoring, device, left).to_dict(),
                       exit_code=1)
    summary = score_job_summary(todo, scoring, device)
    if passes is not None:
        drawn, at_max = passes
        summary = dataclasses.replace(summary, passes_drawn=drawn, passes_at_max=at_max)
        console.print(f"Drew {drawn:,} MC-dropout passes, {drawn / max(at_max, 1):.0%} of the "
                      f"{at_max:,} that K = {scoring.max_mc_passes} would take", highlight=False)
    console.print(f"Done. Next: [bold]{command('integrate', session.project_label)}[/bold]")
    return Outcome(data=summary.to_dict())


def representation_tasks(config: ProjectConfig, store, tasks: list[ScoreTask]) -> list[ScoreTask]:
    """Every representation set the project keeps: those of the scored data sets, and the
    teachers' seen texts."""
    linked = [task.representation for task in tasks if task.representation is not None]
    teachers = list(dict.fromkeys(task.teacher for task in tasks))
    return linked + [task for task, _seen in seen_tasks(config, store, teachers).values()]


def add_representations(session: JobSession, config: ProjectConfig, device,
                        representations: list[ScoreTask],
                        extra: Callable[[], dict[str, Any]] | None = None) -> None:
    """Draw what the scoring left of the representation sets (a project scored before kiwb
    kept them, adaptive or several-process scoring, seen texts): one dropout-off forward per
    text, the MC scores untouched."""
    left = pending_texts(session.store, representations)
    if not left:
        return
    console.print(f"Keeping the teachers' representations of {left:,} text×teacher pairs (one "
                  "dropout-off forward each; the MC scores are kept)", highlight=False)
    with session.progress("representing", total=left, extra=extra) as advance:
        run_representations(config, session.store, representations, device=device,
                            progress=advance, should_stop=session.should_stop)
