"""Adaptive MC-dropout passes: sample a text again only while its routing is undecided.

K passes per text and teacher cost K forwards each, but most texts are routed the same way
after a few: one teacher is far more likely to own them than the others. Scoring with
`mc_passes = "auto"` therefore goes in rounds. Every text gets FIRST passes from every
teacher; the routing is fitted on those estimates; then a text is sampled STEP more passes
per teacher only while its decision is not settled, up to the maximum.

"Settled" is read from the routing itself, whichever it is: the routing's score of each
teacher for the text is recomputed with each pass left out in turn (the jackknife), which
gives a standard error of every score. The decision is settled when the leading teacher's
score, z standard errors down, still beats every other teacher's score z standard errors up.
z is chosen on debian-8 dev (BENCHMARKS.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.choices import DEFAULT_ROUTING
from kiwb.core.routing import TeacherFeatures
from kiwb.core.uncertainty import confidence, entropy

FIRST_PASSES = 4
STEP_PASSES = 4
# What "settled" is judged by while scoring: the default routing, whatever [integration]
# says, so that switching the routing never rescores.
DECISION_ROUTING = DEFAULT_ROUTING

# The routing's (n, N) scores of texts from every teacher's features (FittedRouting.scores).
ScoreOf = Callable[[Sequence[TeacherFeatures]], Tensor]


def schedule(maximum: int, first: int = FIRST_PASSES, step: int = STEP_PASSES) -> list[int]:
    """Passes a text has after each round: first, first + step, ... up to maximum."""
    if maximum < 2:
        raise ValueError(f"adaptive passes need a maximum of at least 2, got {maximum}")
    counts = list(range(min(first, maximum), maximum, step))
    return counts + [maximum]


def features_of(det_logits: Tensor, pass_probs: Tensor) -> TeacherFeatures:
    """One teacher's features from its dropout-off logits (n, C) and passes (n, K, C)."""
    mean = pass_probs.mean(dim=1)
    information = (entropy(mean) - entropy(pass_probs).mean(dim=1)).clamp(min=0.0)
    return TeacherFeatures(confidence(mean), confidence(det_logits.softmax(-1)), information,
                           det_logits, mean)


def leave_one_out(det_logits: Tensor, pass_probs: Tensor) -> list[TeacherFeatures]:
    """The teacher's features with pass k left out, for each of its K passes."""
    count = pass_probs.shape[1]
    keep = ~torch.eye(count, dtype=torch.bool)
    return [features_of(det_logits, pass_probs[:, keep[k]]) for k in range(count)]


@dataclass(frozen=True)
class Spread:
    """Each teacher's routing score of each text and its jackknife standard error."""

    scores: Tensor  # (n, N)
    errors: Tensor  # (n, N)


def routing_spread(score_of: ScoreOf, det_logits: Sequence[Tensor],
                   pass_probs: Sequence[Tensor]) -> Spread:
    """Routing scores of texts and their standard errors over the passes (every teacher the
    same number of passes K >= 2: pass k is left out of all teachers at once, the teachers'
    draws being independent)."""
    counts = {probs.shape[1] for probs in pass_probs}
    if len(counts) != 1 or min(counts) < 2:
        raise ValueError(f"the jackknife needs K >= 2 passes per teacher, the same for all: {counts}")
    count = counts.pop()
    full = score_of([features_of(d, p) for d, p in zip(det_logits, pass_probs, strict=True)])
    dropped = [leave_one_out(d, p) for d, p in zip(det_logits, pass_probs, strict=True)]
    partial = torch.stack([score_of([teacher[k] for teacher in dropped]) for k in range(count)])
    centred = partial - partial.mean(dim=0)
    errors = torch.sqrt((count - 1) / count * (centred ** 2).sum(dim=0))
    return Spread(full.double(), errors.double())


def settled(spread: Spread, z: float) -> Tensor:
    """(n,) whether each text's routing is decided: the leader's score z errors down beats
    every other teacher's z errors up."""
    scores, errors = spread.scores, spread.errors
    leader = scores.argmax(dim=1, keepdim=True)
    low = (scores - z * errors).gather(1, leader).squeeze(1)
    high = (scores + z * errors).scatter(1, leader, -math.inf)
    return low > high.max(dim=1).values


@dataclass(frozen=True)
class Simulated:
    """What adaptive scoring did with passes drawn in advance: passes used per text, and the
    features the routing then reads."""

    passes: Tensor                    # (n,) passes each text got from every teacher
    features: list[TeacherFeatures]   # per teacher, from the passes each text got


def simulate(fit: Callable[[Sequence[TeacherFeatures]], ScoreOf], det_logits: Sequence[Tensor],
             pass_probs: Sequence[Tensor], maximum: int, z: float,
             first: int = FIRST_PASSES, step: int = STEP_PASSES) -> Simulated:
    """Adaptive scoring over passes drawn in advance ((n, >= maximum, C) per teacher, used in
    order): the rounds `kiwb score` runs, with `fit` the routing fitted on the first round's
    estimates (it returns the routing's score function)."""
    counts = schedule(maximum, first, step)
    n = det_logits[0].shape[0]
    used = torch.full((n,), counts[0], dtype=torch.long)
    first_round = [features_of(d, p[:, :counts[0]]) for d, p in zip(det_logits, pass_probs, strict=True)]
    score_of = fit(first_round)
    open_rows = torch.arange(n)
    for now, later in zip(counts, counts[1:], strict=False):
        spread = routing_spread(score_of, [d[open_rows] for d in det_logits],
                                [p[open_rows, :now] for p in pass_probs])
        open_rows = open_rows[~settled(spread, z)]
        if len(open_rows) == 0:
            break
        used[open_rows] = later
    features = [_features_by_count(d, p, used) for d, p in zip(det_logits, pass_probs, strict=True)]
    return Simulated(used, features)


def _features_by_count(det_logits: Tensor, pass_probs: Tensor, used: Tensor) -> TeacherFeatures:
    """Features of each text from its first used[i] passes."""
    mask = torch.arange(pass_probs.shape[1]).unsqueeze(0) < used.unsqueeze(1)  # (n, K)
    weights = mask.to(pass_probs.dtype) / used.unsqueeze(1).to(pass_probs.dtype)
    mean = (pass_probs * weights.unsqueeze(2)).sum(dim=1)
    pass_entropy = (entropy(pass_probs) * weights).sum(dim=1)
    information = (entropy(mean) - pass_entropy).clamp(min=0.0)
    return TeacherFeatures(confidence(mean), confidence(det_logits.softmax(-1)), information,
                           det_logits, mean)
