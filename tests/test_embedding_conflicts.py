"""Conflicting pairs by hand: the pairs two teachers see most differently come first."""

import pytest
import torch

from kiwb.kinds.embedding.conflicts import PairConflict, conflicting_pairs, nearest_pairs

# Four texts. Teacher A: 0 and 1 identical, 2 and 3 identical, the two groups orthogonal.
# Teacher B: 0 and 2 identical, 1 and 3 identical, the groups orthogonal.
A = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
B = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def test_nearest_pairs_by_hand():
    unit = torch.nn.functional.normalize(A, dim=-1)
    assert nearest_pairs(unit, 1) == {(0, 1), (2, 3)}


def test_the_pairs_one_teacher_joins_and_the_other_parts_come_first():
    # Candidates: A's (0,1), (2,3) and B's (0,2), (1,3). Each has cosines 1 under one teacher
    # and 0 under the other: spread 1. Ties go by rows.
    found = conflicting_pairs([A, B], torch.ones(2, 4), limit=3, neighbours=1)
    assert [(p.first, p.second) for p in found] == [(0, 1), (0, 2), (1, 3)]
    assert found[0].cosines == pytest.approx((1.0, 0.0)) and found[0].disagreement == 1.0


def test_a_teacher_that_does_not_cover_a_text_has_no_say_on_its_pairs():
    # B does not cover text 3: (1,3) and (2,3) are A's alone (no disagreement), and B's
    # neighbours are sought among 0, 1 and 2 only.
    coverage = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    found = {(p.first, p.second): p for p in conflicting_pairs([A, B], coverage, limit=10,
                                                               neighbours=1)}
    assert found[(2, 3)].cosines[1] is None and found[(2, 3)].disagreement == 0.0
    assert found[(0, 1)].disagreement == pytest.approx(1.0)


def test_disagreement_of_one_teacher_is_zero():
    assert PairConflict(0, 1, (0.9, None)).disagreement == 0.0
    assert PairConflict(0, 1, (0.9, 0.2, 0.5)).disagreement == pytest.approx(0.7)
