"""`kiwb train` on several devices or machines: DistributedDataParallel with the run's global
batch.

Every rank steps through the same batches (their order is seeded by the run, not the rank);
each takes every world_size-th row of a batch and scales its loss by its share, so the
gradients DDP averages are those one process computes over the whole batch: the same update,
up to the order floating-point sums are taken in. Rank 0 is the recorded job and the only
rank that reads the store, evaluates and checkpoints (with every rank's RNG, so a resumed run
draws the dropout masks an uninterrupted one would). It sends the others what they need once,
at the start: the training data and targets, the step to start from and, on a resume, the
optimizer's state; DDP then gives them rank 0's weights.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kiwb.console import console
from kiwb.workers.ranks import (
    RankLost,
    RankSetup,
    SpawnedRank,
    backend_for,
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
)


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

    def __init__(self, setup: RankSetup, device: torch.device):
        self.setup, self.device = setup, device
        self.members: list[dict] = []  # every rank's device, host and pid (at rank 0)

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
        """The model under DDP: its construction gives every rank rank 0's weights and
        buffers. Buffers are not broadcast again at each forward (they do not change), so a
        forward that runs out of memory on one rank leaves no collective half made."""
        from torch.nn.parallel import DistributedDataParallel

        return _collective(lambda: DistributedDataParallel(
            model, device_ids=[self.device.index or 0] if self.device.type == "cuda" else None,
            broadcast_buffers=False), "sharing the weights")

    def average_gradients(self, model: torch.nn.Module) -> None:
        """Average the whole batch's gradients across ranks, in one flat all-reduce (every
        piece ran under no_sync, so however many pieces a rank's memory needed, each rank
        makes this one collective per step)."""
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        params = [param for param in model.parameters() if param.requires_grad]
        for param in params:  # a part no row reached still takes part, with zeros
            if param.grad is None:
                param.grad = torch.zeros_like(param)
        grads = [param.grad for param in params]
        flat = _flatten_dense_tensors(grads)
        _collective(lambda: dist.all_reduce(flat), "averaging the gradients")
        flat /= self.setup.world_size
        for grad, averaged in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
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
        _collective(lambda: dist.all_reduce(total), "adding up the loss")
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
        import torch.distributed as dist

        data = dataclasses.replace(trainer.data, eval_texts=None, eval_ids=None, eval_routing=None,
                                   eval_reference=None)
        plan = TrainPlan(trainer.training, trainer.request, data, trainer.step,
                         trainer.learning_rate, trainer.autocast_dtype,
                         # as the checkpoint holds it, on the CPU: rank 0's copy is on its GPU
                         {part: state[part] for part in ("optimizer", "scheduler", "scaler")
                          if part in state} if state is not None else None,
                         (state or {}).get("rng_ranks"))
        _collective(lambda: dist.broadcast_object_list([plan], src=0), "sending the plan")
        self._introduce()

    def receive_plan(self) -> TrainPlan:
        import torch.distributed as dist

        holder = [None]
        _collective(lambda: dist.broadcast_object_list(holder, src=0), "waiting for the plan")
        self._introduce()
        return holder[0]

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


def _collective(call, doing: str):
    try:
        return call()
    except RuntimeError as error:  # a rank died or its machine went away
        raise RankLost(f"{doing}: {error}".splitlines()[0]) from None


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
    trainer.eval_features, trainer.pool_check_rows = None, None
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
    try:
        console.print(f"Joining {setup.world_size} ranks as rank 0 on {device}", highlight=False)
        join_ranks(setup, backend_for(device))
        ranks = TrainRanks(setup, device)
        trainer = Trainer(config, session.store, request, prepare(config, session.store, request),
                          device, job_id=session.job.id, ranks=ranks)
        from kiwb.workers.train_job import run_trainer

        return run_trainer(session, trainer, request.run, where=ranks_text(setup, spawned, devices))
    except RankLost as error:
        return lost_outcome(error, spawned)
    except RuntimeError as error:  # DDP's gradient averaging fails inside backward()
        if not _rank_gone(error, spawned):
            raise
        return lost_outcome(RankLost(str(error).splitlines()[0]), spawned)
    finally:
        leave_ranks()
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
    def work(config, device, setup, between) -> str:
        ranks = TrainRanks(setup, device)
        trainer = follower_trainer(config, ranks.receive_plan(), device, ranks)
        console.print(f"rank {setup.rank}: steps {trainer.step:,} to {trainer.total_steps:,}",
                      highlight=False, markup=False)
        def rebalance_only() -> bool:  # rank 0 decides when to stop; this rank shares cores
            between()
            return False

        result = trainer.run(should_stop=rebalance_only)
        return f"{'stopped' if result['stopped'] else 'done'} at step {result['step']:,}"

    return serve_as_rank(root, devices, "training",
                         lambda config: device or config.training.device, backend_for, work)


def main(argv: list[str] | None = None) -> int:
    return rank_main(argv, "kiwb.workers.train_ranks", "train", run_train_follower)


if __name__ == "__main__":
    sys.exit(main())
