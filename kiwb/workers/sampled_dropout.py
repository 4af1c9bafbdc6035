"""Put kiwb's cheaper CPU dropout (kiwb.core.sampled_dropout) into a teacher while it samples.

Two places draw dropout in a transformers encoder: the `nn.Dropout` modules (embeddings,
attention output, feed-forward, classifier) and the attention weights, which SDPA drops
inside `scaled_dot_product_attention`. The first get their `forward` swapped for the
duration; the second get an attention function registered with transformers under its own
name, chosen through the config. Everything is put back on exit.

The random bits come from numpy's SFC64 generator, seeded by the caller: it makes 64 random
bits in 2.5 ns where torch's CPU generator (a Mersenne twister) takes 4.5 ns, and the bits
are 30% of the cost of dropout.

Only on CPU: CUDA's dropout and SDPA kernels already draw cheaply. Models whose attention
does not go through SDPA (an eager-only architecture, a decoder) keep torch's attention
dropout, which is the same law, only slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch
from torch import nn

from kiwb.core.sampled_dropout import LaneSource, attention_with_dropout, dropout

ATTENTION_NAME = "kiwb-sampled-sdpa"
_registered = False
# The lane source of the sampling block in progress; the registered attention function is
# global, so it finds its generator here.
_current_lanes: ContextVar[LaneSource] = ContextVar("kiwb_dropout_lanes")


def numpy_lanes(seed: int) -> LaneSource:
    """A lane source drawing from numpy's SFC64 generator seeded with `seed`."""
    generator = np.random.SFC64(seed)

    def lanes(count: int) -> torch.Tensor:
        words = generator.random_raw((count + 3) // 4).view(np.int64)
        return torch.from_numpy(words).view(torch.int16)[:count]
    return lanes


def _sampled_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0,
                  scaling: float | None = None, is_causal: bool | None = None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    plain = (dropout <= 0.0 or query.device.type != "cpu" or is_causal
             or getattr(module, "is_causal", False) or key.shape[1] != query.shape[1])
    if plain:  # nothing to draw, or a case (causal, grouped heads) SDPA's own code handles
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    return attention_with_dropout(query, key, value, attention_mask, scaling, dropout,
                                  _current_lanes.get()), None


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, _sampled_sdpa)
    # Masks are built by the name in the config too: the same ones SDPA gets.
    AttentionMaskInterface.register(ATTENTION_NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    _registered = True


def _sampled_forward(module: nn.Dropout, lanes: LaneSource):
    def forward(x: torch.Tensor) -> torch.Tensor:
        return dropout(x, module.p, lanes) if module.training else x
    return forward


@contextmanager
def sampled_dropout(model: nn.Module, device: torch.device, seed: int) -> Iterator[None]:
    """Within this block, `model`'s dropout on CPU draws through kiwb.core.sampled_dropout
    from a generator seeded with `seed`; torch's generator, which draws any other dropout
    (and all of it off the CPU), is seeded with `seed` too."""
    torch.manual_seed(seed)
    if device.type != "cpu":
        yield
        return
    # Exactly nn.Dropout: a subclass may do something else in its forward.
    dropouts = [module for module in model.modules() if type(module) is nn.Dropout]
    configs = {id(config): config for config in
               (getattr(module, "config", None) for module in model.modules())
               if getattr(config, "_attn_implementation", None) == "sdpa"
               and not getattr(config, "is_decoder", False)}
    if configs:
        _register()
    lanes = numpy_lanes(seed)
    for module in dropouts:
        module.forward = _sampled_forward(module, lanes)
    for config in configs.values():
        config._attn_implementation = ATTENTION_NAME
    token = _current_lanes.set(lanes)
    try:
        yield
    finally:
        _current_lanes.reset(token)
        for module in dropouts:
            del module.forward
        for config in configs.values():
            config._attn_implementation = "sdpa"
