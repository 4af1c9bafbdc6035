"""The panes' histograms: one binning for every record, worked out by hand."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.core.histograms import BINS, unit_histogram


def test_values_fall_into_twenty_bins_over_the_unit_interval():
    # Bins are 0.05 wide: 0.0 and 0.04 in the first, 0.05 in the second; the last bin holds
    # its right edge, so 0.99 and 1.0 both count there.
    values = [0.0, 0.04, 0.05, 0.99, 1.0]
    expected = [2, 1] + [0] * (BINS - 3) + [2]
    assert unit_histogram(np.array(values)) == expected
    assert unit_histogram(torch.tensor(values)) == expected  # a CPU tensor alike
    assert unit_histogram(np.array([])) == [0] * BINS
