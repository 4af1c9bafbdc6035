"""Has an integration's routing gone wrong? Checks that flag a routing that sends (nearly)
every text to one teacher, or routes far worse than MC confidence on labeled texts.

The counterpart of kiwb.core.learning_check for the step before training: a routing fitted
on a handful of labels can scale one teacher's confidence so far down that it never wins a
text (the temperature routing kiwb had, on five labels, gave a teacher T = 54.6 and 0 of
1,200 texts), and the student then learns that teacher's labels from nobody. Pure Python on
counts and shares (no torch), so the CLI, the workbench and the model card read the same
verdict the workers write.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from kiwb.core.verdict import Verdict

# A teacher is starved when it wins less than this fraction of the texts expected of it...
STARVED_FRACTION = 0.25
# ...and at least this share of the texts was expected of it (smaller shares are noise).
EXPECTED_FLOOR = 0.10
# No teacher is expected to win more than this many even shares (1 / N) of the texts.
# Expected shares come from MC confidence, and among several teachers one that is sharp
# everywhere wins most of the pool under it: of five MiniLM teachers on Debian sections, one
# won 75.6% of the test texts where its labels hold 12.6%, and rank routing, giving it 16.6%,
# was called starving it. Two even shares is 100% for two teachers: nothing changes there.
EXPECTED_EVEN_SHARES = 2.0
# A routing this far below MC confidence's routing accuracy, or more, is much worse...
WORSE_BY = 0.05
# ...when the gap is also beyond this many standard errors of the two accuracies.
WORSE_STANDARD_ERRORS = 2.0
# Fewer labeled texts than this say too little to compare routings.
MIN_LABELED_TEXTS = 20

OK, ONE_TEACHER, WORSE_THAN_MC = "ok", "one-teacher", "worse-than-mc"


@dataclass(frozen=True)
class RoutingCheck(Verdict):
    """A verdict on one integration's routing: `status` is ok, one-teacher or worse-than-mc."""

    status: str
    starved: tuple[str, ...] = ()  # teachers that won far fewer texts than expected
    problem: str = ""  # what is wrong, in words; empty when status is ok
    hint: str = ""     # what to try

    @property
    def flagged(self) -> bool:
        return self.status != OK

    def line(self, subject: str = "the routing") -> str:
        """One line for a log, a table or a model card: empty when nothing is wrong."""
        if not self.flagged:
            return ""
        return f"Warning: {subject} looks wrong: {self.problem}; {self.hint}"

    def to_dict(self) -> dict:
        return {**asdict(self), "starved": list(self.starved)}

    @classmethod
    def from_dict(cls, data: Mapping | None) -> RoutingCheck | None:
        if not data:
            return None
        return cls(data.get("status", OK), tuple(data.get("starved") or ()),
                   data.get("problem", ""), data.get("hint", ""))


@dataclass(frozen=True)
class RoutingComparison:
    """Routing accuracy of the routing used and of MC confidence on the same labeled texts."""

    chosen: float
    mc_confidence: float
    num_texts: int
    where: str = "eval"  # which texts: the eval set, or a labeled pool

    def much_worse(self) -> bool:
        """Whether the routing used is worse than MC confidence by WORSE_BY and by more than
        WORSE_STANDARD_ERRORS standard errors (of the difference of two independent rates: a
        conservative bound, since both are read on the same texts)."""
        if self.num_texts < MIN_LABELED_TEXTS:
            return False
        gap = self.mc_confidence - self.chosen
        spread = math.sqrt((self.chosen * (1 - self.chosen)
                            + self.mc_confidence * (1 - self.mc_confidence)) / self.num_texts)
        return gap >= max(WORSE_BY, WORSE_STANDARD_ERRORS * spread)


def check_routing_outcome(
    routing: str,
    wins: Mapping[str, int],
    expected_shares: Mapping[str, float],
    *,
    uses_labels: bool,
    use_mc: bool = True,
    labels_given: int = 0,
    comparison: RoutingComparison | None = None,
) -> RoutingCheck:
    """Check one integration's routing.

    `wins`: texts each teacher won; `expected_shares`: the share of texts each teacher is
    expected to win (kiwb passes the larger of MC confidence's share and the routing's own
    estimate), at most EXPECTED_EVEN_SHARES / N. A teacher expected to win at least
    EXPECTED_FLOOR of the texts that wins less than STARVED_FRACTION of that is starved.
    `comparison`: the routing against MC confidence on labeled texts, where some exist.
    """
    total = max(1, sum(wins.values()))
    cap = EXPECTED_EVEN_SHARES / max(1, len(wins))
    expected = {name: min(expected_shares.get(name, 0.0), cap) for name in wins}
    starved = [name for name, count in wins.items()
               if expected[name] >= EXPECTED_FLOOR
               and count / total < STARVED_FRACTION * expected[name]]
    parts = []
    if starved:
        leader = max(wins, key=lambda name: wins[name])
        parts.append(
            f"{leader} won {_percent(wins[leader] / total)} of {total:,} texts; "
            + ", ".join(f"{name} won {wins[name]:,} ({_percent(wins[name] / total)}) though an "
                        f"estimated {_percent(expected[name])} are in its labels"
                        for name in starved))
    worse = comparison is not None and comparison.much_worse()
    if worse:
        parts.append(f"routing accuracy on {comparison.where} {_percent(comparison.chosen)} against "
                     f"{_percent(comparison.mc_confidence)} for MC confidence "
                     f"({comparison.num_texts:,} labeled texts)")
    if not parts:
        return RoutingCheck(OK)
    status = ONE_TEACHER if starved else WORSE_THAN_MC
    return RoutingCheck(status, tuple(starved), f"{routing} routing: " + "; ".join(parts),
                        _hint(routing, uses_labels=uses_labels, use_mc=use_mc,
                              labels_given=labels_given))


def _hint(routing: str, *, uses_labels: bool, use_mc: bool, labels_given: int) -> str:
    """What to try instead: MC dropout back on, another routing, or more labels."""
    if not use_mc:
        return "switch MC dropout back on ([integration] use_mc = true, or leave out --no-mc)"
    label_free = " or ".join(f"--routing {name}" for name in ("rank", "confidence")
                             if name != routing)
    if uses_labels:
        return (f"try a routing that needs no labels ({label_free}), or label more "
                f"texts ({labels_given:,} labeled now) and integrate again")
    return f"try another routing ({label_free})"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"
