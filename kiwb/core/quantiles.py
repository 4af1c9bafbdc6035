"""Reading a value against a reference sample: the quantile every label-free routing uses."""

from __future__ import annotations

import torch
from torch import Tensor


def empirical_cdf(sorted_reference: Tensor, values: Tensor) -> Tensor:
    """Share of the reference at or below each value, ties counted half (mid-rank), in [0, 1]."""
    values = values.contiguous()
    below = torch.searchsorted(sorted_reference, values, right=False)
    at_or_below = torch.searchsorted(sorted_reference, values, right=True)
    return (below + at_or_below).double() / (2 * len(sorted_reference))
