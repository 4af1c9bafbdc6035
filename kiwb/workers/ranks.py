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
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from kiwb.project.processes import with_this_kiwb
from kiwb.workers.collectives import RankLost, abort_ranks, collective, joined
from kiwb.workers.rank_watch import how_it_ended

SPAWNED_ENV = "KIWB_SPAWNED_RANK"   # "1" in the ranks a kiwb worker started
DEVICE_ENV = "KIWB_RANK_DEVICE"     # the device a spawned rank computes on
# How long a collective waits for a rank: longer than the slowest shard, short enough that a
# rank that hangs without dying ends the job the same day.
RANK_TIMEOUT = timedelta(minutes=30)
JOIN_TIMEOUT = timedelta(minutes=3)  # for ranks a kiwb worker started to meet
RANK_EXIT_WAIT_S = 30.0  # after the last collective, for the ranks to leave on their own


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


def join_ranks(setup: RankSetup, device, one_gpu_model: bool = False,
               timeout: timedelta = RANK_TIMEOUT) -> list[dict]:
    """Join the job's process group (rendezvous at MASTER_ADDR:MASTER_PORT), then meet the
    other ranks: two ranks on one GPU are refused here, on every rank alike.

    The job's own group is gloo on every device: it carries Python objects and the control
    messages, whose waits may be long (a shard's scoring, rank 0's evaluation), so it keeps
    RANK_TIMEOUT unless told `timeout` (a timeout is each process's own: a training job's
    rank 0 never waits long for the others, they wait for it). A training job's gradients go
    over a group of their own with a short timeout (kiwb.workers.train_ranks.tensor_group).
    Ranks a kiwb worker started meet within JOIN_TIMEOUT, so one that failed to start ends
    the job in minutes. `one_gpu_model`: a scoring job's ranks must draw on one model of GPU
    (refuse_other_gpu_models). Returns what every rank said of its device (gpu_identity)."""
    import torch.distributed as dist

    if dist.is_initialized():
        return []
    if not setup.spawned:  # torchrun's rendezvous, as it set the environment up
        dist.init_process_group("gloo", rank=setup.rank, world_size=setup.world_size,
                                timeout=timeout)
    else:
        try:
            store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                  setup.world_size, is_master=setup.leads, timeout=JOIN_TIMEOUT)
            dist.init_process_group("gloo", store=store, rank=setup.rank,
                                    world_size=setup.world_size, timeout=timeout)
        except (RuntimeError, TimeoutError) as error:
            raise RankLost(f"the ranks did not all meet within {JOIN_TIMEOUT}: {error}"
                           .splitlines()[0]) from None
    joined.set()
    members: list = [None] * setup.world_size
    mine = {"rank": setup.rank, "device": str(device), "host": socket.gethostname(),
            **gpu_identity(device)}
    collective(lambda: dist.all_gather_object(members, mine), "meeting the ranks")
    refuse_shared_gpus(members)
    if one_gpu_model:
        refuse_other_gpu_models(members)
    return members


def gpu_identity(device) -> dict:
    """What a rank says of its GPU when the ranks meet: which GPU it is across processes (its
    UUID: `cuda:N` cannot tell, since a rank given its own CUDA_VISIBLE_DEVICES sees its GPU
    as cuda:0 like every other rank), its model, and whether it has bfloat16 natively."""
    if device.type != "cuda":
        return {"gpu": None}  # CPU ranks may share a machine's cores (cpu,cpu), as asked
    import torch

    from kiwb.workers.runtime import native_bf16

    return {"gpu": str(torch.cuda.get_device_properties(device).uuid),
            "gpu_name": torch.cuda.get_device_name(device), "bf16": native_bf16(device)}


def refuse_other_gpu_models(members: list[dict]) -> None:
    """A score set is keyed by the GPU model its masks were drawn on (which Philox numbers
    fall where follows the launch grid): ranks on two models would fill one set with two
    kinds of draws."""
    from kiwb.errors import KiwbError

    models = {member["gpu_name"]: member for member in members if member.get("gpu")}
    if len(models) > 1:
        (one, first), (other, second) = list(models.items())[:2]
        raise KiwbError(f"ranks {first['rank']} and {second['rank']} score on other GPU models "
                        f"({one}, {other}), whose dropout masks differ: score with one model of "
                        "GPU per job (the other GPUs in a job of their own)")


def refuse_shared_gpus(members: list[dict]) -> None:
    """Two ranks on one GPU fail inside NCCL ("Duplicate GPU detected") when training and
    quietly share the GPU when scoring: refuse it where the ranks meet, naming both."""
    from kiwb.errors import KiwbError

    seen: dict[tuple[str, str], dict] = {}
    for member in members:
        if member.get("gpu") is None:
            continue
        place = (member["host"], member["gpu"])
        if place in seen:
            first = seen[place]
            raise KiwbError(
                f"ranks {first['rank']} and {member['rank']} are on one GPU ({member['gpu']} "
                f"of {member['host']}, as {first['device']} and {member['device']}): give each "
                "rank its own GPU (--devices cuda:0,cuda:1; under torchrun at most one process "
                "per GPU and device = \"auto\")")
        seen[place] = member


def leave_ranks(failed: bool = False) -> None:
    """Leave the process group. After a failure it is aborted, not destroyed: destroying waits
    for a collective still queued on NCCL, which a dead peer never completes (PyTorch says
    such a hang is expected there)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    if failed:
        abort_ranks()
    else:
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
    if configured.startswith("cuda:") and not setup.spawned and _local_world() > 1:
        from kiwb.errors import KiwbError

        raise KiwbError(f"device = {configured!r} in kiwb.toml puts all {_local_world()} "
                        "processes torchrun started on this machine on one GPU: set device = "
                        '"auto" (each local rank takes its own GPU) or give --devices')
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


def _local_world() -> int:
    """How many ranks torchrun started on this machine (LOCAL_WORLD_SIZE; 1 when unsaid)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)


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
        env = with_this_kiwb({**os.environ, **shared, "RANK": str(rank), "LOCAL_RANK": str(rank),
                              DEVICE_ENV: device, SPAWNED_ENV: "1", "PYTHONUNBUFFERED": "1"})
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", module, str(root), str(job_id)],
                cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                close_fds=True)
        spawned.append(SpawnedRank(rank, device, process, log_path))
    return spawned


def lost_outcome(error: RankLost, spawned: list[SpawnedRank], dead: SpawnedRank | None = None):
    """The job's ending when a rank stopped answering: which one (`dead`, when the watch saw
    it), how it ended, its log; the ranks still running are killed (they wait in a
    collective that cannot complete)."""
    from kiwb.console import console
    from kiwb.workers.job import Outcome

    deadline = time.monotonic() + 5.0  # a rank killed a moment ago may not be reaped yet
    while dead is None and time.monotonic() < deadline:
        dead = next((rank for rank in spawned if rank.process.poll() not in (None, 0)), None)
        if dead is None:
            time.sleep(0.1)
    data = lost_data(dead, str(error))
    console.print(f"kiwb: {data['error']}", highlight=False, markup=False)
    _kill(spawned)
    return Outcome("lost", data, 1)


def lost_data(dead: SpawnedRank | None, error: str) -> dict:
    """What a lost job records: the rank that died, how, and its log tail."""
    from kiwb.project.jobs import read_log_tail

    if dead is None:
        return {"error": f"a rank stopped answering ({error}); its own output (torchrun's, for "
                         "ranks torchrun started) says why; run the command again to finish"}
    message = (f"rank {dead.rank} ({dead.device}) died ({how_it_ended(dead.process.returncode)}); "
               "what the ranks were computing is lost; run the command again to go on from "
               "where the job's records stop")
    return {"error": message, "rank": dead.rank, "rank_log": str(dead.log_path),
            "log_tail": read_log_tail(dead.log_path)}


def watch_ranks(session, setup: RankSetup, spawned: list[SpawnedRank]):
    """Rank 0's RankWatch (kiwb.workers.rank_watch) over the job `session`: when the main
    thread stays blocked after the abort, the job is recorded lost from the watch's thread."""
    from kiwb.project.store import Store
    from kiwb.workers.rank_watch import RankWatch

    def give_up(dead: SpawnedRank | None) -> None:
        _kill(spawned)
        with Store(session.store.path) as store:  # this thread's own connection
            store.jobs.end(session.job.id, "lost",
                           {**lost_data(dead, "the main thread stayed blocked in a collective"),
                            "exit_code": 1})

    def cancelled() -> bool:
        with Store(session.store.path) as store:
            return bool(store.jobs.cancel_requested(session.job.id))

    return RankWatch(spawned, give_up, torchrun=not setup.spawned, cancelled=cancelled)


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
                  work, one_gpu_model: bool = False) -> int:
    """Ranks 1..: join rank 0's job and do `work(config, device, setup, between, met)`, which
    returns the line that ends the rank's log (`between()` between rounds or steps takes
    this rank's share of the cores again; `met`: what the ranks said of their devices when
    they met); the exit status."""
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
    cpu, failed = None, True

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
        met = join_ranks(setup, device, one_gpu_model)
        said = work(config, device, setup, between, met)
        failed = False
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
        leave_ranks(failed)
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
