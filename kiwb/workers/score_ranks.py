"""`kiwb score` on several devices or machines: the job's rank 0, and the other ranks.

Rank 0 is the recorded job: under `--devices` it is the job's worker and starts the other
ranks on this machine; under torchrun it is the process torchrun gave rank 0. The other
ranks keep no record: rank 0 follows them, shows their progress in the job's, and when one
dies records the job as lost with that rank's log tail.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kiwb.console import console
from kiwb.errors import KiwbError
from kiwb.project.config import ProjectConfig
from kiwb.project.paths import ProjectPaths
from kiwb.workers.distributed_scoring import RankTally, follow_scoring, lead_scoring
from kiwb.workers.job import JobSession, Outcome
from kiwb.workers.ranks import (
    RankLost,
    SpawnedRank,
    end_spawned,
    expand_devices,
    join_ranks,
    launched_rank,
    leave_ranks,
    lost_outcome,
    rank_device_name,
    spawn_ranks,
)
from kiwb.workers.runtime import prepare_device, resolve_device
from kiwb.workers.score_job import run_score_job


def score_on_ranks(session: JobSession, config: ProjectConfig, devices: list[str] | None) -> Outcome:
    """Rank 0 of a scoring job: start the other ranks when kiwb starts them, then deal out
    and store every pending shard."""
    if config.scoring.mc_passes == "auto":
        raise KiwbError('mc_passes = "auto" scores on one device: its rounds decide on all texts '
                        "at once; drop --devices (or torchrun), or set a number of passes")
    setup = launched_rank()
    spawned: list[SpawnedRank] = []
    if setup is None:  # --devices: this worker starts the others
        devices = expand_devices(devices or [])
        for name in devices:  # a bad name is refused before any rank starts
            resolve_device(name)
        if len(devices) > 1:
            spawned = spawn_ranks(session.root, session.job.id, devices,
                                  ProjectPaths(session.root).logs, "kiwb.workers.score_ranks")
            setup = launched_rank()
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

    where = (f"{setup.world_size} ranks" + (f" ({', '.join(devices)})" if spawned and devices
                                            else " (torchrun)"))
    try:
        console.print(f"Joining {setup.world_size} ranks as rank 0 on {device}", highlight=False)
        join_ranks(setup)
        return run_score_job(session, config, device, where, score_all,
                             extra=lambda: ranks["tally"].figures() if ranks else {})
    except RankLost as error:
        return lost_outcome(error, spawned)
    finally:
        leave_ranks()
        end_spawned(spawned)


def run_follower(root: Path, devices: list[str] | None) -> int:
    """Ranks 1..: score what rank 0 deals out; the exit status."""
    from kiwb.project.config import load_config
    from kiwb.workers.cpu_share import CpuShare
    from kiwb.workers.quiet import quiet_libraries

    quiet_libraries()
    setup = launched_rank()
    assert setup is not None and not setup.leads
    cpu = None
    try:
        config = load_config(root)
        device = resolve_device(rank_device_name(setup, devices, config.scoring.device))
        prepare_device(device)
        cpu = CpuShare(f"rank {setup.rank} of a scoring job in {root}")
        console.print(f"rank {setup.rank} of {setup.world_size} on {device}; "
                      f"{cpu.join()}", highlight=False, markup=False)
        join_ranks(setup)
        scored = follow_scoring(config, rank=setup.rank, device=device,
                                between_rounds=lambda: _rebalance(cpu))
    except RankLost as error:
        print(f"kiwb: rank {setup.rank}: {error}; rank 0 has stopped", file=sys.stderr)
        return 1
    except KiwbError as error:
        print(f"kiwb: error: rank {setup.rank}: {error}", file=sys.stderr)
        return 2
    finally:
        if cpu is not None:
            cpu.leave()
        leave_ranks()
    console.print(f"rank {setup.rank}: done, {scored:,} texts scored", highlight=False)
    return 0


def _rebalance(cpu) -> None:
    line = cpu.rebalance()
    if line:
        console.print(line, highlight=False, markup=False)


def main(argv: list[str] | None = None) -> int:
    """`python -m kiwb.workers.score_ranks PROJECT JOB_ID`: a rank a scoring job started."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or launched_rank() is None:
        print("usage: python -m kiwb.workers.score_ranks PROJECT JOB_ID (started by a kiwb "
              "score job with --devices)", file=sys.stderr)
        return 2
    print(f"kiwb job {args[1]} · rank {os.environ['RANK']} · pid {os.getpid()} · "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", file=sys.stderr, flush=True)
    return run_follower(Path(args[0]).resolve(), None)


if __name__ == "__main__":
    sys.exit(main())
