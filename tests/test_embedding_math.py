"""The embedding kind's math against numbers worked out by hand: SimME's relational loss with
its three pair weightings, the direct term, and the MC dispersion and reliability of a text."""

import math

import pytest
import torch

from kiwb.kinds.embedding.relational import (
    direct_loss,
    pair_weights,
    relational_loss,
    teacher_cosines,
)
from kiwb.kinds.embedding.stability import pass_summary, pooled, reliability

# Three texts. The student places them at (1,0), (0,1), (1,1): cosines 0, 1/sqrt2, 1/sqrt2
# for the pairs (1,2), (1,3), (2,3). Teacher A (2-d) sees 1 and 2 alike and 3 apart:
# cosines 1, 0, 0. Teacher B (3-d, another width) sees 2 and 3 alike: 0, 0, 1; B does not
# cover text 3 (truncated away, say).
STUDENT = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
TEACHER_A = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
TEACHER_B = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
COVERAGE = torch.tensor([[1, 1, 1], [1, 1, 0]])
# Squared gaps per pair (1,2), (1,3), (2,3):
#   A: (0-1)^2 = 1, (0.7071-0)^2 = 0.5, 0.5
#   B: 0, 0.5, (0.7071-1)^2 = (1 - 1/sqrt2)^2 = 0.0857864
GAP_B_23 = (1 - 1 / math.sqrt(2)) ** 2


@pytest.mark.parametrize("weighting, reliable, expected", [
    # every pair, both teachers: (1 + 0.5 + 0.5 + 0 + 0.5 + 0.0858) / 3 pairs
    ("equal", None, (2.5 + GAP_B_23) / 3),
    # B only on (1,2), where it agrees with the student: A's 2 over 3 pairs
    ("maskout", None, 2 / 3),
    # (1,2) is covered by both: A's reliability sqrt(1 * 0.25) = 0.5, B's sqrt(1 * 1) = 1, so
    # its total of 2 splits 2/3 to A and 4/3 to B: A contributes 2/3 * 1, B 4/3 * 0; (1,3)
    # and (2,3) are A's alone (weight 1): 0.5 + 0.5. (2/3 + 1) / 3 = 5/9.
    ("mc", [[1.0, 0.25, 1.0], [1.0, 1.0, 0.0]], 5 / 9),
    # equal reliabilities: mc is maskout
    ("mc", [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]], 2 / 3),
])
def test_relational_loss_by_hand(weighting, reliable, expected):
    weights = pair_weights(weighting, COVERAGE,
                           None if reliable is None else torch.tensor(reliable))
    loss = relational_loss(STUDENT, teacher_cosines([TEACHER_A, TEACHER_B]), weights)
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_mc_weights_keep_maskouts_total_per_pair():
    reliable = torch.tensor([[1.0, 0.25, 1.0], [1.0, 1.0, 0.0]])
    mc = pair_weights("mc", COVERAGE, reliable)
    maskout = pair_weights("maskout", COVERAGE)
    assert torch.allclose(mc.sum(0), maskout.sum(0))
    assert mc[0, 0, 1].item() == pytest.approx(2 / 3) and mc[1, 0, 1].item() == pytest.approx(4 / 3)
    assert mc[1, 0, 2].item() == 0.0  # never a teacher on a pair it does not cover


def test_mc_weights_share_evenly_where_no_teacher_is_reliable():
    mc = pair_weights("mc", torch.ones(2, 2), torch.zeros(2, 2))
    assert mc[:, 0, 1].tolist() == [1.0, 1.0]


def test_the_loss_is_zero_when_the_student_matches_every_covered_pair():
    # A student that copies A, with B covering no text: nothing is left to learn.
    weights = pair_weights("maskout", torch.tensor([[1, 1, 1], [0, 0, 0]]))
    loss = relational_loss(TEACHER_A, teacher_cosines([TEACHER_A, TEACHER_B]), weights)
    assert loss.item() == pytest.approx(0.0, abs=1e-7)


def test_the_loss_sends_gradients_to_the_student_only():
    student = STUDENT.clone().requires_grad_(True)
    loss = relational_loss(student, teacher_cosines([TEACHER_A, TEACHER_B]),
                           pair_weights("equal", COVERAGE))
    loss.backward()
    assert student.grad is not None and student.grad.abs().sum() > 0


def test_one_text_has_no_pair():
    assert relational_loss(STUDENT[:1], teacher_cosines([TEACHER_A[:1]]),
                           pair_weights("equal", COVERAGE[:1, :1])).item() == 0.0


def test_an_unknown_weighting_is_one_line():
    with pytest.raises(ValueError, match="choose one of mc, maskout, equal"):
        pair_weights("uniform", COVERAGE)


def test_direct_loss_by_hand():
    # A: guesses off by (1, 0) on text 1 -> 0.5 per dimension; exact on 2 and 3.
    # B: off by (0, 0, 3) on text 3, which B does not cover -> not counted; exact on 1 and 2.
    guess_a = TEACHER_A + torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    guess_b = TEACHER_B + torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    loss = direct_loss([guess_a, guess_b], [TEACHER_A, TEACHER_B], COVERAGE)
    assert loss.item() == pytest.approx(0.5 / 5)  # five covered (text, teacher) pairs


def test_dispersion_by_hand():
    # Two passes at (1,0) and (0,1): their mean direction is (1,1)/sqrt2, each pass at cosine
    # 1/sqrt2 to it: dispersion 1 - 1/sqrt2. A text whose passes agree: 0.
    passes = torch.tensor([[[1.0, 0.0], [2.0, 2.0]], [[0.0, 1.0], [1.0, 1.0]]])  # (K=2, n=2, d=2)
    centre, dispersion = pass_summary(passes)
    assert dispersion.tolist() == pytest.approx([1 - 1 / math.sqrt(2), 0.0], abs=1e-6)
    assert centre[0].tolist() == pytest.approx([1 / math.sqrt(2)] * 2)
    assert centre.norm(dim=-1).tolist() == pytest.approx([1.0, 1.0])


def test_reliability_is_the_share_scattered_more():
    # Mid-rank quantiles of 0.1, 0.3, 0.2 are 1/6, 5/6, 1/2; reliability is one minus.
    assert reliability(torch.tensor([0.1, 0.3, 0.2])).tolist() == pytest.approx([5 / 6, 1 / 6, 0.5])
    assert reliability(torch.tensor([0.1, 0.1])).tolist() == pytest.approx([0.5, 0.5])


def test_pooling_by_hand():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])  # the third token is padding
    mask = torch.tensor([[1, 1, 0]])
    assert pooled(hidden, mask, "mean").tolist() == [[2.0, 3.0]]
    assert pooled(hidden, mask, "cls").tolist() == [[1.0, 2.0]]
    with pytest.raises(ValueError, match="choose mean or cls"):
        pooled(hidden, mask, "max")
