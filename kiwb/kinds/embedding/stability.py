"""What MC dropout says about an embedding teacher on one text: how far its K dropout
embeddings stay from their mean. A teacher that knows a text places it steadily; one out of
its depth moves it around."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional

from kiwb.core.routing import empirical_cdf


def pooled(hidden: Tensor, attention_mask: Tensor, pooling: str) -> Tensor:
    """A sentence embedding from token states (n, L, d): the mean over real tokens, or the
    first token's state ("cls")."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling != "mean":
        raise ValueError(f"unknown pooling {pooling!r}; choose mean or cls")
    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (n, L, 1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)


def pass_summary(passes: Tensor) -> tuple[Tensor, Tensor]:
    """The K dropout embeddings of n texts, (K, n, d) -> their mean direction (n, d), unit
    length, and each text's dispersion (n,): 1 - the mean cosine of the passes to that mean.
    Zero when every pass agrees (dropout off), larger the more the passes scatter."""
    unit = functional.normalize(passes.float(), dim=-1)
    centre = functional.normalize(unit.mean(0), dim=-1)  # (n, d)
    agreement = (unit * centre[None]).sum(-1).mean(0)  # (K, n, d) . (1, n, d) -> (n,)
    return centre, (1.0 - agreement).clamp_min(0.0)


def reliability(dispersion: Tensor) -> Tensor:
    """Each text's reliability under one teacher, in [0, 1]: the share of the pool's texts
    the teacher scatters more than this one (1 - the mid-rank quantile of its dispersion).
    Dispersions of two teachers are not on one scale (their widths and dropout differ); their
    quantiles are, as rank routing compares classifiers' confidences."""
    return 1.0 - empirical_cdf(torch.sort(dispersion.double()).values, dispersion.double()).float()
