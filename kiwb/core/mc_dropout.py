"""Monte-Carlo dropout: K stochastic forward passes with every dropout layer active."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import Tensor, nn

STRATEGIES = ("loop", "replicate")


@contextmanager
def mc_dropout_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put a model in training mode for sampling, and restore every module's mode after.

    Attention dropout in transformers is gated on the attention module's own `training`
    flag (it is a functional call, not an nn.Dropout), so switching only the Dropout
    modules on would miss it. Normalisation layers with running statistics stay in eval
    mode: their training behaviour is not dropout and would change the model.
    """
    previous = {module: module.training for module in model.modules()}
    model.train()
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()
    try:
        yield model
    finally:
        for module, was_training in previous.items():
            module.train(was_training)


def _logits(model: nn.Module, inputs: Mapping[str, Tensor]) -> Tensor:
    return model(**inputs).logits.float()


@torch.no_grad()
def deterministic_logits(model: nn.Module, inputs: Mapping[str, Tensor]) -> Tensor:
    """Logits with dropout off, shape (n, C)."""
    was_training = model.training
    model.eval()
    try:
        return _logits(model, inputs)
    finally:
        model.train(was_training)


@torch.no_grad()
def mc_logits(
    model: nn.Module, inputs: Mapping[str, Tensor], passes: int, strategy: str = "loop"
) -> Tensor:
    """Logits of `passes` dropout samples, shape (K, n, C) (a token classifier: (K, n, T, C)).

    "loop" runs K forwards of the batch; "replicate" runs one forward of the batch tiled
    K times, which fills a GPU better at K times the activation memory.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown MC strategy {strategy!r}; choose one of {STRATEGIES}")
    with mc_dropout_mode(model):
        if strategy == "loop":
            return torch.stack([_logits(model, inputs) for _ in range(passes)])
        batch_size = next(iter(inputs.values())).shape[0]
        tiled = {name: value.repeat(passes, *([1] * (value.dim() - 1))) for name, value in inputs.items()}
        logits = _logits(model, tiled)  # (K * n, ...), pass-major: repeat tiles whole batches
        return logits.view(passes, batch_size, *logits.shape[1:])  # (K, n, C) or (K, n, T, C)
