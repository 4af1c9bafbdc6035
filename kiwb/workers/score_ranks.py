"""`kiwb score` on several devices or machines: the job's rank 0, and the other ranks.

Rank 0 is the recorded job: under `--devices` it is the job's worker and starts the other
ranks on this machine; under torchrun it is the process torchrun gave rank 0. The other
ranks keep no record: rank 0 follows them, shows their progress in the job's, and when one
dies records the job as lost with that rank's log tail.
"""

from __future__ import annotations

from pathlib import Path

from kiwb.console import console
from kiwb.errors import KiwbError
from kiwb.project.config import ProjectConfig
from kiwb.workers.collectives import exit_process
from kiwb.workers.distributed_scoring import RankTally, follow_scoring, lead_scoring
from kiwb.workers.job import JobSession, Outcome
from kiwb.workers.ranks import (
    RankLost,
    end_spawned,
    join_ranks,
    leave_ranks,
    lost_outcome,
    rank_device_name,
    rank_main,
    ranks_text,
    serve_as_rank,
    start_ranks,
    watch_ranks,
)
from kiwb.workers.runtime import resolve_device
from kiwb.workers.score_job import run_score_job


def score_on_ranks(session: JobSession, config: ProjectConfig, devices: list[str] | None) -> Outcome:
    """Rank 0 of a scoring job: start the other ranks when kiwb starts them, then deal out
    and store every pending shard."""
    if config.scoring.mc_passes == "auto":
        raise KiwbError('mc_passes = "auto" scores on one device: its rounds decide on all texts '
                        "at once; drop --devices (or torchrun), or set a number of passes")
    setup, spawned, devices = start_ranks(session, devices, "kiwb.workers.score_ranks")
    if setup is None:  # --devices all on a one-GPU machine: one process
        from kiwb.workers.score import run_scoring

        device = resolve_device(devices[0])
        session.started(device)
        return run_score_job(session, config, device, str(device), lambda tasks, advance: (
            advance and run_scoring(config, session.store, tasks, device=device, progress=advance,
                                    should_stop=session.should_stop, job_id=session.job.id)))
    device = resolve_device(rank_device_name(setup, devices, config.scoring.device))
    session.started(device)
    ranks: dict[str, RankTally] = {}  # the ranks' tally, once they said who they are

    def score_all(tasks, advance) -> None:
        lead_scoring(config, session.store, tasks, device=device, world_size=setup.world_size,
                     progress=advance, should_stop=session.should_stop, job_id=session.job.id,
                     on_ranks=lambda tally: ranks.update(tally=tally))

    where = ranks_text(setup, spawned, devices)
    failed = True
    try:
        with watch_ranks(session, setup, spawned) as watch:
            try:
                console.print(f"Joining {setup.world_size} ranks as rank 0 on {device}",
                              highlight=False)
                join_ranks(setup, device, one_gpu_model=True)
                outcome = run_score_job(session, config, device, where, score_all,
                                        extra=lambda: ranks["tally"].figures() if ranks else {})
                failed = False
                return outcome
            except RankLost as error:
                return lost_outcome(error, spawned, watch.dead)
    finally:
        leave_ranks(failed)
        end_spawned(spawned)


def run_follower(root: Path, devices: list[str] | None, device: str | None = None) -> int:
    """Ranks 1..: score what rank 0 deals out; the exit status."""
    def work(config, device, setup, between, met) -> str:
        scored = follow_scoring(config, rank=setup.rank, device=device, between_rounds=between)
        return f"done, {scored:,} texts scored"

    return serve_as_rank(root, devices, "scoring", lambda config: device or config.scoring.device,
                         work, one_gpu_model=True)


def main(argv: list[str] | None = None) -> int:
    return rank_main(argv, "kiwb.workers.score_ranks", "score", run_follower)


if __name__ == "__main__":
    exit_process(main())
