"""Judged pairs fed back by hand: the teacher on the wrong side of a judgement stops counting on
both texts of the pair."""

import torch

from kiwb.kinds.embedding.pair_labels import JudgedPair, apply_judgements, judged_pairs

TEXTS = ["a cat", "a kitten", "a car", "x ⟷ y"]
# Teacher A puts 0 and 1 together (cos 1), teacher B apart (cos 0).
A = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
B = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])


def test_judged_pairs_are_found_by_their_texts():
    given = {"a cat ⟷ a kitten": "similar", "a cat ⟷ a car": "not similar",
             "a cat ⟷ x ⟷ y": "similar",  # a text holding the joiner itself
             "a cat ⟷ a dog": "similar",  # "a dog" is not in the pool
             "a kitten ⟷ a car": None}    # none of these labels
    assert judged_pairs(given, TEXTS) == [JudgedPair(0, 1, True), JudgedPair(0, 2, False),
                                          JudgedPair(0, 3, True)]


def test_similar_takes_the_teacher_that_parts_them_off_both_texts():
    coverage, taken = apply_judgements([A, B], torch.ones(2, 4), [JudgedPair(0, 1, True)])
    assert coverage.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1]] and taken == 2


def test_not_similar_takes_the_teacher_that_joins_them():
    coverage, _ = apply_judgements([A, B], torch.ones(2, 4), [JudgedPair(0, 1, False)])
    assert coverage.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]


def test_a_pair_only_one_teacher_covers_is_left_as_it_is():
    coverage = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0]])
    revised, taken = apply_judgements([A, B], coverage, [JudgedPair(0, 1, True)])
    assert torch.equal(revised, coverage) and taken == 0
