"""Training lengths and learning rates that suit the student and the pool (no torch).

The paper's recipe (lr 2e-5, 3 epochs, batch 32) suits BERT-base on 100k texts: ~9,000
optimizer steps. A user's pool of 2,000 texts gets 188 steps, and a small student at 2e-5
moves too little in them: it collapses onto the most frequent classes. Two corrections,
chosen on BENCHMARKS.md's "Training defaults" figures:

- a minimum number of optimizer steps, so a small pool gets more epochs;
- a learning rate that grows as the student narrows. Fine-tuning practice puts the best rate
  near 1e-5 for BERT-large (hidden 1024), 2e-5 for BERT-base (768), 1e-4 for MiniLM-L6 (384)
  and 1e-3 for 2-layer, 128-wide BERTs; 2e-5 x (768 / hidden)^2 passes through all of them.
"""

from __future__ import annotations

import math

AUTO = "auto"
# The passes over the texts, and the optimizer steps a run takes at least: the student's
# [training] defaults and `kiwb teach`'s, one rule for both (a teacher on 1,080 texts got 102
# steps from 3 epochs and never learnt its rarest class; at 306 steps it did).
DEFAULT_EPOCHS = 3.0
DEFAULT_MIN_STEPS = 300
REFERENCE_HIDDEN = 768
REFERENCE_LEARNING_RATE = 2e-5
LEARNING_RATE_RANGE = (1e-5, 3e-3)
# config.json keys that hold the width of an encoder, across model families.
WIDTH_KEYS = ("hidden_size", "dim", "d_model", "n_embd")


def auto_learning_rate(hidden_size: int | None) -> float:
    """2e-5 x (768 / hidden)^2 within LEARNING_RATE_RANGE; 2e-5 when the width is unknown."""
    if not hidden_size:
        return REFERENCE_LEARNING_RATE
    rate = REFERENCE_LEARNING_RATE * (REFERENCE_HIDDEN / hidden_size) ** 2
    low, high = LEARNING_RATE_RANGE
    return min(high, max(low, rate))


def model_width(model_config) -> int | None:
    """The hidden size a transformers config declares, under whichever name its family uses."""
    for key in WIDTH_KEYS:
        value = getattr(model_config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def resolve_learning_rate(setting: float | str, model_config) -> tuple[float, str]:
    """The learning rate to use and how it was chosen, for the log."""
    if setting != AUTO:
        return float(setting), "set in [training]"
    width = model_width(model_config)
    rate = auto_learning_rate(width)
    return rate, (f"auto, for hidden size {width}" if width else "auto; hidden size unknown")


def total_steps(num_texts: int, batch_size: int, epochs: float, min_steps: int) -> int:
    """Optimizer steps of a run: `epochs` over the texts, raised to `min_steps`."""
    per_epoch = math.ceil(num_texts / batch_size)
    return max(1, math.ceil(epochs * per_epoch), min_steps)


# A sigmoid output (a multi-label student's label) is its own yes-or-no
# question, learnt from every text but told "yes" only by the texts its targets say yes to. At
# the 300 steps that teach a softmax student, the multi-label demo's student fitted its targets
# at 68% and the tests' tiny one at 80%; at 3x they fitted 97% and 92% (BENCHMARKS.md,
# "Students that fit their targets"). A rare label needs more still: the minimum then grows
# until the rarest label a check would flag (yes on at least `floor` of the texts) has been
# seen YES_EXPOSURES times as a yes (a softmax demo student sees each of its 8 classes that
# often at 300 steps), within MAX_STEPS_FACTOR x the configured minimum.
SIGMOID_STEPS_FACTOR = 3
YES_EXPOSURES = 1_200
MAX_STEPS_FACTOR = 4


def label_exposure_steps(yes_rates, batch_size: int, min_steps: int,
                         floor: float) -> tuple[int, int | None]:
    """A sigmoid student's least number of steps: SIGMOID_STEPS_FACTOR x `min_steps`, raised
    until each output whose targets say yes to at least `floor` of the texts is seen
    YES_EXPOSURES times as a yes, within MAX_STEPS_FACTOR x `min_steps`; and the index in
    `yes_rates` of the rarest output when it raised them (else None). `min_steps` 0 (train
    exactly the epochs) asks for no minimum: 0."""
    if not min_steps:
        return 0, None
    steps = SIGMOID_STEPS_FACTOR * min_steps
    taught = [(rate, index) for index, rate in enumerate(yes_rates) if rate >= floor]
    if not taught:
        return steps, None
    rate, rarest = min(taught)
    wanted = min(math.ceil(YES_EXPOSURES / (batch_size * rate)), MAX_STEPS_FACTOR * min_steps)
    return (wanted, rarest) if wanted > steps else (steps, None)
