"""The judgements a user gives conflicting pairs ("similar" / "not similar", in the Conflicts
pane or by kiwb labels import), fed back into the targets: on a judged pair, a teacher whose
cosine sits on the wrong side of the covering teachers' midpoint is wrong about those two texts,
so it stops counting on them (its coverage of both is taken away, as maskout takes away a text
it cannot read). Every pair of those texts then learns from the teachers that were right."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional

from kiwb.kinds.embedding import NOT_SIMILAR, PAIR_JOINER, SIMILAR


@dataclass(frozen=True)
class JudgedPair:
    first: int
    second: int
    similar: bool


def judged_pairs(given: dict[str, str | None], texts: list[str]) -> list[JudgedPair]:
    """The pool's judged pairs, from the labels given (pair text -> label; a conflicting
    pair's text is its two texts joined as the conflicts list shows them). A pair naming a
    text the pool lacks, or marked none, is left out."""
    rows = {text: row for row, text in enumerate(texts)}
    found = []
    for text, label in given.items():
        if label not in (SIMILAR, NOT_SIMILAR):
            continue
        parts = text.split(PAIR_JOINER)
        # a text may hold the joiner itself: take the split whose two sides are pool texts
        for cut in range(1, len(parts)):
            first, second = PAIR_JOINER.join(parts[:cut]), PAIR_JOINER.join(parts[cut:])
            if first in rows and second in rows:
                found.append(JudgedPair(rows[first], rows[second], label == SIMILAR))
                break
    return found


def apply_judgements(embeddings: list[torch.Tensor], coverage: torch.Tensor,
                     pairs: list[JudgedPair]) -> tuple[torch.Tensor, int]:
    """The coverage (T, n) with each judged pair's wrong teachers taken off both its texts,
    and how many (teacher, text) places that took away."""
    units = [functional.normalize(teacher.float(), dim=-1) for teacher in embeddings]
    revised = coverage.clone()
    for pair in pairs:
        covering = [t for t in range(len(units))
                    if coverage[t, pair.first] > 0 and coverage[t, pair.second] > 0]
        if len(covering) < 2:
            continue  # one teacher's word against nobody's: nothing to correct
        cosines = {t: float(units[t][pair.first] @ units[t][pair.second]) for t in covering}
        middle = (max(cosines.values()) + min(cosines.values())) / 2
        for teacher, cosine in cosines.items():
            if (cosine < middle) if pair.similar else (cosine > middle):
                revised[teacher, pair.first] = revised[teacher, pair.second] = 0.0
    return revised, int((coverage - revised).sum())
