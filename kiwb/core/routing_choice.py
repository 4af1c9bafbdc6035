"""Choosing a project's routing (`routing = "auto"`): which of the label-free routings fits the
teachers at hand, measured where labeled texts allow it.

No routing wins everywhere (BENCHMARKS.md, "Choosing the routing"): reading the teachers'
representations routes best on debian-8, their confidences read as pool quantiles with three
to five teachers and on the demo. Every label-free routing is fitted on the pool without a
label, so measuring each on the labeled texts is fair to each; what is not fair is reporting
the best of them on the texts it was picked on. So the figure reported for the choice is
cross-validated: the routing picked on one half of the labeled texts, measured on the other,
both ways round, over repeated random halvings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.choices import FEW_LABEL_ROUTINGS, OWN_SCORE_ROUTINGS, READS_REPRESENTATION, ROUTINGS

# Fewer labeled texts than this are not measured on: the halves the choice is cross-validated
# on would hold under 10 texts each. Between this and a few hundred, the switching rule below
# keeps the label-free choice unless the labels show another is better.
MIN_LABELED_TEXTS = 20
CV_REPEATS = 20   # random halvings for the cross-validated figure
# Another routing replaces the label-free choice only where it beats it on the labeled texts
# by more than this many standard errors of the paired difference. Chosen on the dev sets
# (BENCHMARKS.md): picking the plain best on 25 to 100 labels lost to the label-free choice.
SWITCH_Z = 2.0
CV_SEED = 0       # fixed: the same labeled texts give the same figure


@dataclass(frozen=True)
class Candidate:
    """A label-free routing and the signal it reads: the MC-dropout passes or the plain
    (dropout-off) one. The routings of a teacher's own scores read no dropout."""

    routing: str
    use_mc: bool = True

    @property
    def name(self) -> str:
        plain = not self.use_mc and self.routing not in OWN_SCORE_ROUTINGS
        return self.routing + (" (plain)" if plain else "")

    @classmethod
    def parse(cls, name: str) -> Candidate:
        """The candidate a name (`rank (plain)`, `mahalanobis`) stands for."""
        routing, plain = name.removesuffix(" (plain)"), name.endswith(" (plain)")
        if routing not in ROUTINGS or routing in FEW_LABEL_ROUTINGS:
            raise ValueError(f"{name!r} is not a label-free routing")
        return cls(routing, not plain)


def candidates(*, mc: bool = True, representations: bool = True) -> list[Candidate]:
    """Every label-free routing kiwb can fit, MC and plain where the routing reads a
    confidence. `mc` False (the no-MC ablation): only the plain confidence ones, so that the
    ablation still says what MC dropout buys. `representations` False: the routings that read
    a teacher's representation are left out (its scores were made without them)."""
    found = []
    for routing in ROUTINGS:
        if routing in FEW_LABEL_ROUTINGS:
            continue
        if routing in OWN_SCORE_ROUTINGS:
            if mc and (representations or routing not in READS_REPRESENTATION):
                found.append(Candidate(routing))
            continue
        if mc:
            found.append(Candidate(routing, True))
        found.append(Candidate(routing, False))
    return found


@dataclass(frozen=True)
class LabeledChoice:
    """The routing picked on labeled texts: each candidate's accuracy on all of them, the pick,
    and the cross-validated accuracy of picking this way (the honest figure)."""

    accuracies: tuple[float, ...]  # per candidate, on every labeled text
    chosen: int                    # index of the pick: the highest (the earliest on a tie)
    cross_validated: float         # picked on one half, measured on the other
    texts: int

    @property
    def optimism(self) -> float:
        """How much the pick's own figure overstates what picking this way gives."""
        return self.accuracies[self.chosen] - self.cross_validated


def choose_on_labels(right: Tensor, *, z: float = SWITCH_Z, repeats: int = CV_REPEATS,
                     seed: int = CV_SEED) -> LabeledChoice:
    """`right` (n, m) bool: whether candidate j routes labeled text i to a teacher that knows
    its label; candidate 0 is the label-free choice. The pick is the candidate right most often
    among those that beat candidate 0 by more than `z` standard errors of their paired
    difference (and candidate 0 itself): a few labels that cannot tell routings apart leave
    the label-free choice as it is. Its figure is cross-validated: over `repeats` random
    halvings, the candidate picked on one half is measured on the other."""
    if right.dim() != 2 or right.shape[0] < 2 or right.shape[1] < 1:
        raise ValueError(f"choosing a routing needs 2 or more labeled texts and 1 or more "
                         f"candidates, got {tuple(right.shape)}")
    right = right.double()
    chosen = int(_pick(right, z))
    generator = torch.Generator().manual_seed(seed)
    n = right.shape[0]
    measured = []
    for _ in range(repeats):
        order = torch.randperm(n, generator=generator)
        halves = (order[: n // 2], order[n // 2:])
        for pick_on, measure_on in (halves, halves[::-1]):
            measured.append(right[measure_on, _pick(right[pick_on], z)].mean())
    return LabeledChoice(tuple(float(a) for a in right.mean(0)), chosen,
                         float(torch.stack(measured).mean()), n)


def _pick(right: Tensor, z: float) -> Tensor:
    """The pick of `choose_on_labels` on (n, m) float rightness."""
    gain = right - right[:, :1]                                  # (n, m) paired differences
    mean = gain.mean(0)
    if len(right) > 1:
        error = gain.std(0, unbiased=True) / len(right) ** 0.5
    else:  # one text proves nothing
        error = torch.full_like(mean, float("inf"))
    eligible = (mean > 0) & ((mean > z * error) if z > 0 else True)
    eligible[0] = True
    accuracies = torch.where(eligible, right.mean(0), torch.tensor(-1.0, dtype=right.dtype))
    return _first_max(accuracies)


def _first_max(values: Tensor) -> Tensor:
    """Index of the largest value, the first of those within float noise of it."""
    return (values >= values.max() - 1e-12).nonzero()[0, 0]


def routed_right(routing_scores: Tensor, true_labels: Tensor, coverage: Tensor) -> Tensor:
    """(n,) bool: whether each text's top-scored teacher knows its true label.
    `routing_scores` (n, N), `true_labels` (n,) union indices, `coverage` (N, |Y|)."""
    return coverage[routing_scores.argmax(dim=1), true_labels]


def right_matrix(scores_by_candidate: Sequence[Tensor], true_labels: Tensor,
                 coverage: Tensor) -> Tensor:
    """(n, m) bool: `routed_right` of each candidate's (n, N) routing scores, side by side."""
    return torch.stack([routed_right(scores, true_labels, coverage)
                        for scores in scores_by_candidate], dim=1)


# The routing taken without labels (BENCHMARKS.md, "Choosing the routing"): the joint router
# routed best of every label-free routing on the test texts of debian-8 and of three, four and
# five teachers (and best or level on dev), so no label-free rule is needed to choose among
# them while it can be fitted. Without the teachers' representations (scores made before kiwb
# kept them), rank on the plain confidence: the best mean on the same dev sets of the routings
# that read confidences alone.
LABEL_FREE_ORDER = (Candidate("joint"), Candidate("rank", False), Candidate("rank", True))


def label_free_choice(options: Sequence[Candidate]) -> tuple[Candidate, str]:
    """The candidate taken without labeled texts to measure on, and why, in words."""
    for option in LABEL_FREE_ORDER:
        if option in options:
            return option, (f"no labeled texts to measure on: {option.name}, kiwb's label-free "
                            "default")
    return options[0], f"no labeled texts to measure on: {options[0].name}"
