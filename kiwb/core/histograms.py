"""The histograms an integration or a score set keeps for the workbench's panes: counts in
fixed bins, so that every pane draws every kind's record alike."""

from __future__ import annotations

import numpy as np

BINS = 20  # what a pane can draw at 80 columns, bar by bar


def unit_histogram(values) -> list[int]:
    """Counts of `values` (a numpy array or a CPU tensor) in BINS equal bins over [0, 1]:
    confidences, margins, normalised entropies."""
    return np.histogram(np.asarray(values), bins=BINS, range=(0.0, 1.0))[0].tolist()
