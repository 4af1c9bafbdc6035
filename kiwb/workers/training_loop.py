"""The one training core that the student's Trainer, `kiwb teach` and the demo's pre-training
step through: AdamW with weight-decay groups, warm-up then linear decay, loss scaling for
float16, micro-batches that halve on out-of-memory, gradient clipping, and losses read back
to the host in batches with non-finite ones refused.

What each training is about (its loss, its data order, evaluation and checkpoints) stays
with its caller, which hands the core a `loss_of(rows)` for a piece of a batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kiwb.errors import KiwbError
from kiwb.workers.runtime import autocast_context, halving_on_oom

# Biases and normalisation weights are not decayed: decay pulls them toward 0, which for a
# LayerNorm's gain means toward switching the layer off.
NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
MAX_GRAD_NORM = 1.0


def warmup_then_linear_decay(step: int, total_steps: int, warmup_steps: int) -> float:
    """The learning-rate factor of `step` (0-based): up in `warmup_steps` + 1 equal steps,
    then linearly down to 0 at `total_steps`."""
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: decayed weights, and biases and norms without decay."""
    named = list(model.named_parameters())
    return [{"params": [p for name, p in named if not name.endswith(NO_DECAY)],
             "weight_decay": weight_decay},
            {"params": [p for name, p in named if name.endswith(NO_DECAY)], "weight_decay": 0.0}]


class OptimizerSteps:
    """Optimizer, schedule and loss scaler of one training, taking one step per batch."""

    def __init__(self, model: torch.nn.Module, device: torch.device, *, learning_rate: float,
                 weight_decay: float, total_steps: int, warmup_ratio: float, batch_size: int,
                 autocast_dtype: str = "float32"):
        self.model, self.device, self.autocast_dtype = model, device, autocast_dtype
        self.optimizer = torch.optim.AdamW(decay_groups(model, weight_decay), lr=learning_rate)
        warmup = int(warmup_ratio * total_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: warmup_then_linear_decay(step, total_steps, warmup))
        # Half-precision gradients underflow without loss scaling; bfloat16's range needs none.
        self.scaler = torch.amp.GradScaler("cuda", enabled=autocast_dtype == "float16")
        self.micro_batch = batch_size  # what fits in memory, carried from step to step

    def step(self, rows: torch.Tensor, loss_of: Callable[[torch.Tensor], torch.Tensor],
             reduce: Callable[[], None] | None = None,
             units: Callable[[torch.Tensor], int] = len) -> torch.Tensor:
        """One optimizer step over the batch `rows`; returns its loss, still on the device.

        `loss_of(piece)` is the mean loss of a piece of the batch over its `units(piece)` loss
        terms (a text each by default; a word each for a tagger): each piece counts by its
        share of the batch's terms, so the pieces add up to the batch's mean. After an
        out-of-memory error the pieces halve: their gradients accumulate to the same update.
        On several ranks `reduce` averages the gradients across ranks once they are whole:
        an out-of-memory error on one rank is then retried there alone, without a collective
        the others do not make.
        """
        loss, self.micro_batch = halving_on_oom(
            lambda size: self.accumulate(rows, size, loss_of, units), self.micro_batch,
            self.device, "training on")
        if reduce is not None:
            reduce()
        self.update()
        return loss

    def accumulate(self, rows: torch.Tensor, micro_batch: int,
                   loss_of: Callable[[torch.Tensor], torch.Tensor],
                   units: Callable[[torch.Tensor], int] = len) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)  # a failed attempt may have left some
        total = torch.zeros((), device=self.device)
        whole = units(rows)
        for piece in rows.split(micro_batch):
            with autocast_context(self.device, self.autocast_dtype):
                loss = loss_of(piece) * (units(piece) / whole)
            self.scaler.scale(loss).backward()
            total += loss.detach().float()
        return total

    def update(self) -> None:
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        # With fp16 the scaler skips the optimizer step when gradients overflowed (and lowers
        # its scale); the learning-rate schedule must not advance over a step not taken.
        if scale is None or self.scaler.get_scale() >= scale:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    @property
    def learning_rate(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def state_dict(self) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        if self.scaler.is_enabled():
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])


def read_losses(pending: list[tuple[int, torch.Tensor]], autocast_dtype: str,
                rate_setting: str = "[training] learning_rate") -> list[float]:
    """The losses of (step, loss) pairs not yet read, in one host sync; a non-finite one
    stops the training before anything checkpoints the weights it spoiled (the message
    names `rate_setting` as what to lower)."""
    if not pending:
        return []
    values = torch.stack([loss for _, loss in pending]).tolist()
    for (step, _), value in zip(pending, values, strict=True):
        if not math.isfinite(value):
            raise KiwbError(non_finite_loss_message(step, value, autocast_dtype, rate_setting))
    pending.clear()
    return values


def non_finite_loss_message(step: int, loss: float, autocast_dtype: str,
                            rate_setting: str = "[training] learning_rate") -> str:
    fix = ('float16 overflows: set [training] mixed_precision = "bf16" (or "no")'
           if autocast_dtype == "float16" else
           f"lower {rate_setting}, or check the base checkpoint's weights (kiwb predict)")
    return (f"the training loss became {loss} at step {step}; stopped before any checkpoint "
            f"took those weights (the last checkpoint is intact). {fix}")
