"""`kiwb train` on several devices or machines: data-parallel with the run's global batch.

Every rank steps through the same batches (their order is seeded by the run, not the rank);
each takes every world_size-th row of a batch and scales its loss by its share, so the
gradients the ranks average are those one process computes over the whole batch: the same
update, up to the order floating-point sums are taken in. Rank 0 is the recorded job and the
only rank that reads the store, evaluates and checkpoints (with every rank's RNG, so a
resumed run draws the dropout masks an uninterrupted one would). It sends the others what
they need once, at the start: the training data and targets, the step to start from and, on
a resume, the optimizer's state; then its weights and buffers.

No DistributedDataParallel: every step runs its pieces (as many as one rank's memory needs)
and then makes one gradient average, which DDP's reducer cannot (it would average each piece,
or, under no_sync, carry gradient buckets of a parameter's size for nothing). The gradients
are averaged in place, in buckets of BUCKET_BYTES.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch

from kiwb.console import console
from kiwb.workers.collectives import collective as _collective
from kiwb.workers.collectives import exit_process
from kiwb.workers.object_transfer import receive_object, send_object
from kiwb.workers.ranks import (
    RankLost,
    RankSetup,
    SpawnedRank,
    end_spawned,
    join_ranks,
    leave_ranks,
    lost_outcome,
    rank_device_name,
    rank_main,
    ranks_text,
    refuse_mixed_devices,
    serve_as_rank,
    start_ranks,
    watch_ranks,
)

BUCKET_BYTES = 25 * 2**20  # gradients averaged per collective: few calls, little memory


@dataclass
class TrainPlan:
    """What rank 0 sends the other ranks before the first step."""

    training: object  # the run's [training] settings, overrides applied
    request: object   # TrainRequest
    data: object      # TrainingData without the eval set
    step: int
    learning_rate: float
    autocast_dtype: str
    optimizer: dict | None  # the optimizer's, schedule's and scaler's state on a resume
    rng_ranks: list | None  # every rank's RNG state at the checkpoint resumed from


class TrainRanks:
    """This rank's part in a data-parallel run: the collectives the Trainer calls."""

    def __init__(self, setup: RankSetup, device: torch.device, group=None,
                 met: list[dict] | None = None):
        self.setup, self.device = setup, device
        self.members: list[dict] = []  # every rank's device, host and pid (at rank 0)
        self.group = group  # the tensors' own group (tensor_group); None: the job's group
        self.met = met or []  # what each rank said of its GPU when they met (join_ranks)

    @property
    def leads(self) -> bool:
        return self.setup.leads

    def share(self, rows: torch.Tensor, units: Callable[[torch.Tensor], int] = len
              ) -> tuple[torch.Tensor, float]:
        """This rank's rows of a batch and its loss factor (world size x its share of the
        batch's loss terms, `units`: texts by default, words for a tagger), so that the
        averaged gradients are the whole batch's mean. A batch smaller than the ranks leaves
        some without a row: they run one row at factor 0, so every rank still takes part in
        averaging the gradients."""
        mine = rows[self.setup.rank::self.setup.world_size]
        if len(mine) == 0:
            return rows[:1], 0.0
        return mine, self.setup.world_size * units(mine) / units(rows)

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """Give every rank rank 0's weights and buffers, once (the model itself is trained:
        buffers do not change in training, and gradients are averaged by
        average_gradients)."""
        import torch.distributed as dist

        for tensor in [*model.parameters(), *model.buffers()]:
            _collective(lambda tensor=tensor: dist.broadcast(tensor.data, src=0, group=self.group),
                        "sharing the weights")
        return model

    def average_gradients(self, model: torch.nn.Module) -> None:
        """Average the whole batch's gradients across ranks, in place, one collective per
        bucket of about BUCKET_BYTES (every piece of the batch is in them already, so each
        rank makes the same collectives once per step, however many pieces its memory
        needed)."""
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        params = [param for param in model.parameters() if param.requires_grad]
        for param in params:  # a part no row reached still takes part, with zeros
            if param.grad is None:
                param.grad = torch.zeros_like(param)
        for bucket in gradient_buckets([param.grad for param in params], BUCKET_BYTES):
            if len(bucket) == 1:  # a large tensor goes as it is, with no flat copy
                _collective(lambda grad=bucket[0]: dist.all_reduce(grad, group=self.group),
                            "averaging the gradients")
                bucket[0] /= self.setup.world_size
                continue
            flat = _flatten_dense_tensors(bucket)
            _collective(lambda flat=flat: dist.all_reduce(flat, group=self.group),
                        "averaging the gradients")
            flat /= self.setup.world_size
            for grad, averaged in zip(bucket, _unflatten_dense_tensors(flat, bucket), strict=True):
                grad.copy_(averaged)

    def agree(self, stop: bool) -> bool:
        """Rank 0's decision to stop at this step, for every rank."""
        import torch.distributed as dist

        flag = torch.tensor([int(stop)])
        _collective(lambda: dist.broadcast(flag, src=0), "agreeing on the next step")
        return bool(flag.item())

    def mean(self, loss: torch.Tensor) -> torch.Tensor:
        """The batch's loss from the ranks' scaled shares (still on the device)."""
        import torch.distributed as dist

        total = loss.detach().clone()
        _collective(lambda: dist.all_reduce(total, group=self.group), "adding up the loss")
        return total / self.setup.world_size

    def gather_rng(self) -> list | None:
        """Every rank's RNG state, at rank 0 (None elsewhere)."""
        import torch.distributed as dist

        mine = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            mine["device"] = torch.cuda.get_rng_state(self.device)
        states = [None] * self.setup.world_size if self.leads else None
        _collective(lambda: dist.gather_object(mine, states, dst=0), "gathering the RNG states")
        return states

    def send_plan(self, trainer, state: dict | None) -> None:
        """Rank 0: what the others need to take the same steps."""
        data = dataclasses.replace(trainer.data, eval_texts=None, eval_ids=None, eval_routing=None,
                                   eval_reference=None)
        plan = TrainPlan(trainer.training, trainer.request, data, trainer.step,
                         trainer.learning_rate, trainer.autocast_dtype,
                         # as the checkpoint holds it, on the CPU: rank 0's copy is on its GPU
                         {part: state[part] for part in ("optimizer", "scheduler", "scaler")
                          if part in state} if state is not None else None,
                         (state or {}).get("rng_ranks"))
        send_object(plan, "sending the plan")
        self._introduce()

    def receive_plan(self) -> TrainPlan:
        plan = receive_object("waiting for the plan")
        self._introduce()
        return plan

    def _introduce(self) -> None:
        """Every rank's device, host and pid, for the job's per-rank progress."""
        import socket

        import torch.distributed as dist

        members: list = [None] * self.setup.world_size
        mine = {"rank": self.setup.rank, "device": str(self.device), "host": socket.gethostname(),
                "pid": os.getpid()}
        _collective(lambda: dist.all_gather_object(members, mine), "introducing the ranks")
        self.members = members
        refuse_mixed_devices([member["device"] for member in members])

    def figures(self, step: int, batch_size: int) -> dict:
        """Per-rank progress: the texts each rank has trained on so far (its share of each
        batch), in the shape kiwb jobs and the Jobs pane read."""
        world = self.setup.world_size
        return {"ranks": [{**member, "texts": step * len(range(member["rank"], batch_size, world))}
                          for member in self.members]}


def gradient_buckets(grads: list[torch.Tensor], limit: int) -> list[list[torch.Tensor]]:
    """The gradients in order, in runs of at most `limit` bytes (a tensor larger than that
    alone); the same on every rank, since every rank has the same model."""
    buckets: list[list[torch.Tensor]] = []
    size = 0
    for grad in grads:
        grad_bytes = grad.numel() * grad.element_size()
        if not buckets or size + grad_bytes > limit or buckets[-1][0].dtype != grad.dtype:
            buckets.append([])
            size = 0
        buckets[-1].append(grad)
        size += grad_bytes
    return buckets


def tensor_group(device: torch.device, timeout_s: float):
    """The group a training job's tensors go over, with a short timeout of its own (the job's
    group keeps RANK_TIMEOUT for waits that may be long, as rank 0's evaluations): NCCL for
    GPUs, gloo for CPUs.

    NCCL waits on the GPU, so a collective whose peer died would leave rank 0's thread free
    and its kernel stuck until the watchdog's timeout tore the process down unrecorded. With
    TORCH_NCCL_BLOCKING_WAIT the calling thread waits for each collective, raises when its
    timeout passes, and raises when RankWatch aborts the group (it also turns off NCCL's async
    error handling, which would kill the process instead). A value set outside kiwb stays."""
    import torch.distributed as dist

    if device.type == "cuda":
        os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    return dist.new_group(backend="nccl" if device.type == "cuda" else "gloo",
                          timeout=timedelta(seconds=timeout_s))


def follower_trainer(config, plan: TrainPlan, device: torch.device, ranks: TrainRanks):
    """A Trainer for ranks 1..: the same model, steps and batches as rank 0's, no store."""
    from kiwb.workers.train import Trainer
    from kiwb.workers.training_loop import OptimizerSteps

    config = dataclasses.replace(config, training=plan.training)
    trainer = Trainer(config, None, plan.request, plan.data, device, ranks=ranks)
    rank = ranks.setup.rank
    torch.manual_seed(trainer.training.seed + rank)  # each rank its own dropout masks
    trainer.model, trainer.tokenizer = trainer.initial_model()
    trainer.step, trainer.best = plan.step, None
    trainer.learning_rate, trainer.autocast_dtype = plan.learning_rate, plan.autocast_dtype
    trainer.model.to(device)
    trainer.steps = OptimizerSteps(
        trainer.model, device, learning_rate=trainer.learning_rate,
        weight_decay=trainer.training.weight_decay, total_steps=trainer.total_steps,
        warmup_ratio=trainer.training.warmup_ratio, batch_size=trainer.training.batch_size,
        autocast_dtype=trainer.autocast_dtype)
    if plan.optimizer is not None:
        trainer.steps.load_state_dict(plan.optimizer)
    if plan.rng_ranks and len(plan.rng_ranks) == ranks.setup.world_size:
        torch.set_rng_state(plan.rng_ranks[rank]["cpu"])
        if device.type == "cuda" and "device" in plan.rng_ranks[rank]:
            torch.cuda.set_rng_state(plan.rng_ranks[rank]["device"], device)
    trainer.features = plan.data.student.features(trainer.tokenizer, plan.data,
                                                  trainer.training.max_length)
    trainer.eval_features, trainer.pool_sample_rows = None, None
    trainer.train_model = ranks.wrap(trainer.model)
    return trainer


def train_on_ranks(session, config, settings, request, devices: list[str] | None):
    """Rank 0 of a training job: start the other ranks when kiwb starts them, then train."""
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.train import Trainer, prepare

    setup, spawned, devices = start_ranks(session, devices, "kiwb.workers.train_ranks")
    if setup is None:  # --devices all on a one-GPU machine: one process
        from kiwb.workers.train_job import train_here

        return train_here(session, config, settings, request, resolve_device(devices[0]))
    device = resolve_device(rank_device_name(setup, devices, config.training.device))
    session.started(device)
    failed = True
    try:
        with watch_ranks(session, setup, spawned) as watch:
            try:
                console.print(f"Joining {setup.world_size} ranks as rank 0 on {device}",
                              highlight=False)
                # rank 0 waits for the others only briefly (they wait for its evaluations)
                met = join_ranks(setup, device,
                                 timeout=timedelta(seconds=config.training.rank_timeout_s))
                ranks = TrainRanks(setup, device,
                                   tensor_group(device, config.training.rank_timeout_s), met)
                trainer = Trainer(config, session.store, request,
                                  prepare(config, session.store, request,
                                          session.project().kind), device,
                                  job_id=session.job.id, ranks=ranks)
                from kiwb.workers.train_job import run_trainer

                outcome = run_trainer(session, trainer, request.run,
                                      where=ranks_text(setup, spawned, devices))
                failed = False
                return outcome
            except RankLost as error:
                return lost_outcome(error, spawned, watch.dead)
            except RuntimeError as error:  # a rank's failure surfacing inside a step
                if not _rank_gone(error, spawned):
                    raise
                return lost_outcome(RankLost(str(error).splitlines()[0]), spawned, watch.dead)
    finally:
        leave_ranks(failed)
        end_spawned(spawned)


def _rank_gone(error: RuntimeError, spawned: list[SpawnedRank]) -> bool:
    """Whether an error inside a step came from a rank that went away."""
    if any(rank.process.poll() not in (None, 0) for rank in spawned):
        return True
    text = str(error).lower()
    return any(sign in text for sign in ("gloo", "nccl", "connection closed", "connection reset",
                                         "broken pipe"))


def run_train_follower(root: Path, devices: list[str] | None, device: str | None = None) -> int:
    """Ranks 1..: take the steps rank 0 takes, on this rank's share of each batch."""
    def work(config, device, setup, between, met) -> str:
        ranks = TrainRanks(setup, device,
                           tensor_group(device, config.training.rank_timeout_s), met)
        trainer = follower_trainer(config, ranks.receive_plan(), device, ranks)
        console.print(f"rank {setup.rank}: steps {trainer.step:,} to {trainer.total_steps:,}",
                      highlight=False, markup=False)
        def rebalance_only() -> bool:  # rank 0 decides when to stop; this rank shares cores
            between()
            return False

        result = trainer.run(should_stop=rebalance_only)
        return f"{'stopped' if result['stopped'] else 'done'} at step {result['step']:,}"

    return serve_as_rank(root, devices, "training",
                         lambda config: device or config.training.device, work)


def main(argv: list[str] | None = None) -> int:
    return rank_main(argv, "kiwb.workers.train_ranks", "train", run_train_follower)


if __name__ == "__main__":
    exit_process(main())
