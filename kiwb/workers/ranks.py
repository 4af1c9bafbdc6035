"""Several processes on one job: where this process stands among them, and starting them.

A job runs on several devices as torch.distributed ranks, whoever started them:
- `kiwb score --devices cuda:0,cuda:1` (or `all`, or `cpu,cpu`): the job's worker is rank 0
  and starts the other ranks on this machine itself (`spawn_ranks`), each with its own log;
- `torchrun` / `accelerate launch` over one or several machines: every rank runs
  `kiwb score ... --foreground`; rank 0 records the job, the others only compute.
Either way rank 0 alone opens the project store: SQLite is not safe on network file systems,
so the other ranks send what they computed to rank 0 through torch.distributed (gloo, which
carries Python objects on any device).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

SPAWNED_ENV = "KIWB_SPAWNED_RANK"   # "1" in the ranks a kiwb worker started
DEVICE_ENV = "KIWB_RANK_DEVICE"     # the device a spawned rank computes on
# How long a collective waits for a rank: longer than the slowest shard, short enough that a
# rank that hangs without dying ends the job the same day.
RANK_TIMEOUT = timedelta(minutes=30)
JOIN_TIMEOUT = timedelta(minutes=3)  # for ranks a kiwb worker started to meet
RANK_EXIT_WAIT_S = 30.0  # after the last collective, for the ranks to leave on their own


class RankLost(Exception):
    """A rank stopped answering (it died, or its machine or network went away)."""


@dataclass(frozen=True)
class RankSetup:
    """This process's place among the job's ranks."""

    rank: int
    world_size: int
    local_rank: int
    spawned: bool  # started by a kiwb worker (--devices), not by torchrun

    @property
    def leads(self) -> bool:
        return self.rank == 0


def refuse_mixed_devices(devices: list[str]) -> None:
    """Every rank of a job on one kind of device: CPU and CUDA draw other dropout masks (so
    scores would mix two score sets), and a training job's ranks must share a backend."""
    kinds = sorted({name.split(":")[0] for name in devices})
    if len(kinds) > 1:
        from kiwb.errors import KiwbError

        raise KiwbError(f"the ranks run on {' and '.join(kinds)} devices ({', '.join(devices)}); "
                        "give every rank the same kind (--devices, or --device under torchrun)")


def launched_rank() -> RankSetup | None:
    """Where this process stands among ranks that torchrun, accelerate launch or a kiwb worker
    started (their environment says so); None when it runs alone."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1 or "RANK" not in os.environ:
        return None
    rank = int(os.environ["RANK"])
    return RankSetup(rank, world, int(os.environ.get("LOCAL_RANK", rank)),
                     os.environ.get(SPAWNED_ENV) == "1")


def join_ranks(setup: RankSetup, backend: str = "gloo") -> None:
    """Join the job's process group (rendezvous at MASTER_ADDR:MASTER_PORT). Ranks a kiwb
    worker started meet within JOIN_TIMEOUT, so one that failed to start ends the job in
    minutes, not after the half hour a collective may wait."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if not setup.spawned:  # torchrun's rendezvous, as it set the environment up
        dist.init_process_group(backend, rank=setup.rank, world_size=setup.world_size,
                                timeout=RANK_TIMEOUT)
        return
    try:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              setup.world_size, is_master=setup.leads, timeout=JOIN_TIMEOUT)
        dist.init_process_group(backend, store=store, rank=setup.rank,
                                world_size=setup.world_size, timeout=RANK_TIMEOUT)
    except (RuntimeError, TimeoutError) as error:
        raise RankLost(f"the ranks did not all meet within {JOIN_TIMEOUT}: {error}"
                       .splitlines()[0]) from None


def leave_ranks() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def rank_device_name(setup: RankSetup, devices: list[str] | None, configured: str) -> str:
    """The device of this rank: a spawned rank's own, the --devices entry of its local rank,
    else one GPU per local rank where the project scores on CUDA."""
    if os.environ.get(DEVICE_ENV):
        return os.environ[DEVICE_ENV]
    if devices:
        # under torchrun every rank reads --devices itself: `all` means every GPU of its machine
        devices = expand_devices(devices)
        if setup.local_rank >= len(devices):
            from kiwb.errors import KiwbError

            raise KiwbError(f"rank {setup.rank} is local rank {setup.local_rank}, but --devices "
                            f"names {len(devices)} device(s); name one per process of a machine")
        return devices[setup.local_rank]
    if configured in ("auto", "cuda"):
        import torch

        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            if setup.local_rank >= count:  # a modulo would put two ranks on one GPU
                from kiwb.errors import KiwbError

                raise KiwbError(f"rank {setup.rank} is local rank {setup.local_rank}, but this "
                                f"machine has {count} GPU(s): start one process per GPU "
                                f"(torchrun --nproc-per-node {count})")
            return f"cuda:{setup.local_rank}"
    return configured


def expand_devices(names: list[str]) -> list[str]:
    """`all`: every GPU here; otherwise the names as given."""
    if names != ["all"]:
        return names
    import torch

    from kiwb.errors import KiwbError

    if not torch.cuda.is_available():
        raise KiwbError("--devices all: no CUDA device here; name them (cpu,cpu runs two CPU "
                        "processes)")
    return [f"cuda:{index}" for index in range(torch.cuda.device_count())]


@dataclass
class SpawnedRank:
    rank: int
    device: str
    process: subprocess.Popen
    log_path: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def backend_for(device) -> str:
    """Object and control messages go over gloo; a GPU job's tensors over NCCL."""
    return "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"


def spawn_ranks(root: Path, job_id: int, devices: list[str], logs: Path,
                module: str) -> list[SpawnedRank]:
    """Start ranks 1.. on this machine, one per further device, each running
    `python -m MODULE ROOT JOB_ID`, and make this process rank 0 (its environment names the
    rendezvous); each rank logs to logs/job-ID.rank-N.log."""
    port = free_port()
    shared = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
              "WORLD_SIZE": str(len(devices))}
    os.environ.update({**shared, "RANK": "0", "LOCAL_RANK": "0", DEVICE_ENV: devices[0],
                       SPAWNED_ENV: "1"})
    spawned = []
    for rank, device in enumerate(devices[1:], start=1):
        log_path = logs / f"job-{job_id}.rank-{rank}.log"
        env = {**os.environ, **shared, "RANK": str(rank), "LOCAL_RANK": str(rank),
               DEVICE_ENV: device, SPAWNED_ENV: "1", "PYTHONUNBUFFERED": "1"}
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", module, str(root), str(job_id)],
                cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                close_fds=True)
        spawned.append(SpawnedRank(rank, device, process, log_path))
    return spawned


def lost_outcome(error: RankLost, spawned: list[SpawnedRank]):
    """The job's ending when a rank stopped answering: which one, how it ended, its log;
    the ranks still running are killed (they wait in a collective that cannot complete)."""
    from kiwb.console import console
    from kiwb.project.jobs import read_log_tail
    from kiwb.workers.job import Outcome

    deadline = time.monotonic() + 5.0  # a rank killed a moment ago may not be reaped yet
    dead = []
    while not dead and time.monotonic() < deadline:
        dead = [rank for rank in spawned if rank.process.poll() not in (None, 0)]
        time.sleep(0.1)
    if not dead:
        message = (f"a rank stopped answering ({error}); its own output (torchrun's, for ranks "
                   "torchrun started) says why; run the command again to finish")
        console.print(f"kiwb: {message}", highlight=False, markup=False)
        _kill(spawned)
        return Outcome("lost", {"error": message}, 1)
    rank = dead[0]
    message = (f"rank {rank.rank} ({rank.device}) died ({_how(rank.process.returncode)}); "
               "what the ranks were computing is lost; run the command again to go on from "
               "where the job's records stop")
    console.print(f"kiwb: {message}", highlight=False, markup=False)
    _kill(spawned)
    return Outcome("lost", {"error": message, "rank": rank.rank, "rank_log": str(rank.log_path),
                            "log_tail": read_log_tail(rank.log_path)}, 1)


def _how(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def end_spawned(spawned: list[SpawnedRank]) -> None:
    """Wait for the ranks this worker started to leave; kill those that do not."""
    deadline = time.monotonic() + RANK_EXIT_WAIT_S
    for rank in spawned:
        try:
            rank.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001  (TimeoutExpired: a rank stuck in a collective)
            rank.process.kill()
            rank.process.wait()


def _kill(spawned: list[SpawnedRank]) -> None:
    for rank in spawned:
        if rank.process.poll() is None:
            rank.process.kill()


def start_ranks(session, devices: list[str] | None, module: str
                ) -> tuple[RankSetup | None, list[SpawnedRank], list[str] | None]:
    """Rank 0's side of starting a job on several devices: under torchrun the ranks are
    there already; with --devices this worker starts ranks 1.. (`python -m MODULE`). Returns
    this process's setup (None: one device after all, as `--devices all` on a one-GPU
    machine), the ranks it started, and the device names."""
    from kiwb.project.paths import ProjectPaths
    from kiwb.workers.runtime import resolve_device

    setup = launched_rank()
    if setup is not None:  # torchrun's ranks: `all` is each machine's GPUs, as each rank reads it
        return setup, [], expand_devices(devices) if devices else devices
    devices = expand_devices(devices or [])
    for name in devices:  # a bad name is refused before any rank starts
        resolve_device(name)
    if len(devices) == 1:
        return None, [], devices
    spawned = spawn_ranks(session.root, session.job.id, devices, ProjectPaths(session.root).logs,
                          module)
    return launched_rank(), spawned, devices


def ranks_text(setup: RankSetup, spawned: list[SpawnedRank], devices: list[str] | None) -> str:
    """`2 ranks (cuda:0, cuda:1)`, or `4 ranks (torchrun)`, for the job's first line."""
    return f"{setup.world_size} ranks " + (f"({', '.join(devices or [])})" if spawned else "(torchrun)")


def serve_as_rank(root: Path, devices: list[str] | None, what: str, configured_device,
                  backend, work) -> int:
    """Ranks 1..: join rank 0's job and do `work(config, device, setup, between)`, which
    returns the line that ends the rank's log (`between()` between rounds or steps takes
    this rank's share of the cores again); the exit status."""
    from kiwb.console import console
    from kiwb.errors import KiwbError
    from kiwb.project.config import load_config
    from kiwb.workers.cpu_share import CpuShare
    from kiwb.workers.quiet import quiet_libraries
    from kiwb.workers.runtime import prepare_device, resolve_device

    quiet_libraries()
    setup = launched_rank()
    assert setup is not None and not setup.leads
    if setup.spawned:
        _leave_with_parent()
    cpu = None

    def between() -> None:
        line = cpu.rebalance()
        if line:
            console.print(line, highlight=False, markup=False)

    try:
        config = load_config(root)
        device = resolve_device(rank_device_name(setup, devices, configured_device(config)))
        prepare_device(device)
        cpu = CpuShare(f"rank {setup.rank} of a {what} job in {root}")
        shared = cpu.join()
        console.print(f"rank {setup.rank} of {setup.world_size} on {device}"
                      + (f"; {shared}" if shared else ""), highlight=False, markup=False)
        join_ranks(setup, backend(device))
        said = work(config, device, setup, between)
    except RankLost as error:
        print(f"kiwb: rank {setup.rank}: {error}; rank 0 has stopped", file=sys.stderr)
        return 1
    except RuntimeError as error:  # a collective inside backward(), or this rank's own fault
        print(f"kiwb: rank {setup.rank}: {str(error).splitlines()[0]}", file=sys.stderr)
        return 1
    except KiwbError as error:
        print(f"kiwb: error: rank {setup.rank}: {error}", file=sys.stderr)
        return 2
    finally:
        if cpu is not None:
            cpu.leave()
        leave_ranks()
    console.print(f"rank {setup.rank}: {said}", highlight=False, markup=False)
    return 0


def _leave_with_parent() -> None:
    """A rank that a worker started ends when that worker (rank 0) is gone, rather than wait
    in a collective for half an hour holding its GPU."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                print("kiwb: rank 0 (this rank's worker) is gone; leaving", file=sys.stderr,
                      flush=True)
                os._exit(1)

    threading.Thread(target=watch, name="kiwb-rank-parent", daemon=True).start()


def rank_main(argv: list[str] | None, module: str, kind: str, serve) -> int:
    """`python -m MODULE PROJECT JOB_ID`: a rank that a `kiwb KIND --devices` job started."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or launched_rank() is None:
        print(f"usage: python -m {module} PROJECT JOB_ID (started by a kiwb {kind} job with "
              "--devices)", file=sys.stderr)
        return 2
    print(f"kiwb job {args[1]} · rank {os.environ['RANK']} · pid {os.getpid()} · "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", file=sys.stderr, flush=True)
    return serve(Path(args[0]).resolve(), None)
