"""What a score job does around the scoring itself, on one process or several: plan the score
sets, say what is left, score it, and say how it ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kiwb.console import console
from kiwb.project.config import ProjectConfig
from kiwb.workers.job import JobSession, Outcome
from kiwb.workers.score import (
    ScoreTask,
    pending_texts,
    plan_scoring,
    register_tasks,
    score_job_summary,
)

# (the tasks, the progress callback or None when nothing is left to score)
ScoreAll = Callable[[list[ScoreTask], Callable[[str, int], None] | None], None]


def run_score_job(session: JobSession, config: ProjectConfig, device, where: str,
                  score_all: ScoreAll, extra: Callable[[], dict[str, Any]] | None = None) -> Outcome:
    """Plan, then `score_all` what is pending on `where` (a device, or the ranks), then the
    outcome: finished, or a partial one when another process still holds some shards."""
    store = session.store
    tasks = plan_scoring(config, store, device)
    register_tasks(store, tasks)
    todo = pending_texts(store, tasks)
    if todo == 0:
        score_all(tasks, None)  # ranks still wait to be told there is nothing to do
        console.print("All scores are up to date (cached); nothing to do.")
        return Outcome(data=score_job_summary(0, config.scoring, device).to_dict())
    console.print(f"Scoring {todo:,} text×teacher pairs on {where} "
                  f"(K = {config.scoring.mc_passes} MC-dropout passes each)", highlight=False)
    with session.progress("scoring", total=todo, extra=extra) as advance:
        score_all(tasks, advance)
    left = pending_texts(store, tasks)
    if left:
        console.print(f"{left:,} pairs are being scored by another process; run again to finish.")
        return Outcome(data=score_job_summary(todo - left, config.scoring, device, left).to_dict(),
                       exit_code=1)
    console.print(f"Done. Next: [bold]kiwb integrate {session.project_label}[/bold]")
    return Outcome(data=score_job_summary(todo, config.scoring, device).to_dict())
