"""The fit figure (how well a student reproduces its own training targets) and the cause the
learning check reads from it, against numbers worked out by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kiwb.core.learning_check import (
    COLLAPSED,
    OK,
    STUDENT_HINT,
    TARGETS_AT_FAULT,
    TRAINING_AT_FAULT,
    LearningCheck,
    with_fit,
)
from kiwb.core.target_fit import (
    FIT_FLOOR,
    agreement,
    correlation,
    decisive_yes,
    micro_f1,
    per_teacher_agreement,
    thresholded_fit,
)
from kiwb.kinds.multilabel.student import MultiLabelStudent
from kiwb.kinds.multitask.heads import Head
from kiwb.kinds.multitask.student import MultiTaskStudent

# Three texts, two labels: text 0 is a, text 1 is a and b, text 2 is b (soft targets).
TARGETS = torch.tensor([[0.9, 0.2], [0.8, 0.7], [0.1, 0.6]])


def test_a_multi_label_student_that_copies_its_targets_fits_them_exactly():
    assert thresholded_fit(TARGETS.clone(), TARGETS) == 1.0


def test_a_multi_label_student_that_outputs_the_base_rates_fits_as_worked_out():
    # Base rates of the thresholded targets: a 2/3, b 2/3 -> yes to both labels of every text.
    # Truth: (a), (a, b), (b): 4 yes of 6. Decided: 6 yes, 4 right: TP 4, FP 2, FN 0.
    # micro F1 = 2*4 / (2*4 + 2 + 0) = 0.8.
    base_rates = (TARGETS > 0.5).float().mean(0).expand(3, 2)
    assert thresholded_fit(base_rates, TARGETS) == pytest.approx(0.8)
    # With one rare label (b yes on 1 of 3 texts), the base rates say no to b: TP 2 (a on
    # texts 0, 1), FP 1 (a on text 2), FN 1 (b on text 2): 2*2 / (4 + 2) = 2/3.
    rare = torch.tensor([[0.9, 0.2], [0.8, 0.3], [0.1, 0.6]])
    assert thresholded_fit((rare > 0.5).float().mean(0).expand(3, 2), rare) == pytest.approx(2 / 3)


def test_micro_f1_of_nothing_to_find_and_nothing_claimed_is_one():
    nothing = torch.zeros(2, 3)
    assert micro_f1(nothing, nothing) == 1.0
    assert micro_f1(torch.ones(2, 3), nothing) == 0.0


def test_single_label_agreement_of_a_copy_and_of_the_majority_class():
    taught = torch.tensor([0, 0, 1])
    assert agreement(taught.clone(), taught) == 1.0
    assert agreement(torch.zeros(3, dtype=torch.long), taught) == pytest.approx(2 / 3)


def test_correlation_of_pair_similarities_by_hand():
    assert correlation(torch.tensor([0.1, 0.5, 0.9]), torch.tensor([0.2, 0.6, 1.0])) == pytest.approx(1.0)
    assert correlation(torch.tensor([0.1, 0.5, 0.9]), torch.tensor([1.0, 0.6, 0.2])) == pytest.approx(-1.0)
    # mean-centred (-1, 0, 1) against (-1, 2, -1): covariance 0
    assert correlation(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 3.0, 0.0])) == pytest.approx(0.0)
    assert correlation(torch.ones(3), torch.tensor([1.0, 2.0, 3.0])) == 0.0  # no spread


FLAGGED = LearningCheck(COLLAPSED, ("b",), "never predicts b", STUDENT_HINT)


def test_a_flagged_student_that_does_not_fit_its_targets_blames_training():
    check = with_fit(FLAGGED, 0.6, FIT_FLOOR)
    assert check.cause == TRAINING_AT_FAULT and check.fit == 0.6 and check.hint == STUDENT_HINT
    assert ("never predicts b; it does not fit its targets (60.0% on the pool texts it trained "
            "on), so training is at fault; try more steps") in check.line()


def test_a_flagged_student_that_fits_its_targets_blames_them():
    check = with_fit(FLAGGED, 0.97, FIT_FLOOR, routing_accuracy=0.41)
    assert check.cause == TARGETS_AT_FAULT
    line = check.line()
    assert "it fits its targets (97.0% on the pool texts it trained on), so the targets are wrong" in line
    assert "more steps will not help" in line and "routing sends 41.0% of the eval texts" in line
    assert LearningCheck.from_dict(check.to_dict()) == check


def test_a_student_that_passes_keeps_its_fit_and_no_cause():
    check = with_fit(LearningCheck(OK), 0.5, FIT_FLOOR)
    assert check.status == OK and check.fit == 0.5 and check.cause == "" and check.line() == ""
    assert with_fit(FLAGGED, None, FIT_FLOOR) == FLAGGED


def test_a_sigmoid_students_minimum_steps_by_hand():
    from kiwb.core.training_defaults import label_exposure_steps

    # common labels: 3 x 300; 0: exactly the epochs, as asked
    assert label_exposure_steps([0.3, 0.5], 32, 300, 0.02) == (900, None)
    assert label_exposure_steps([0.3, 0.5], 32, 0, 0.02) == (0, None)
    # a label yes on 3.6% of the texts, batch 32: 1,200 / (32 x 0.036) = 1,041.7 -> 1,042 steps,
    # over 900, so it decides (index 1); one under the floor (1%) is not counted
    assert label_exposure_steps([0.3, 0.036, 0.01], 32, 300, 0.02) == (1042, 1)
    # rarer still (2%): 1,875 steps wanted, capped at 4 x 300
    assert label_exposure_steps([0.02, 0.5], 32, 300, 0.02) == (1200, 0)


def test_a_kept_checkpoint_from_before_the_student_fitted_names_both_fits():
    check = with_fit(FLAGGED, 0.7, FIT_FLOOR, reached=0.95)
    assert check.cause == TARGETS_AT_FAULT and check.fit == 0.7 and check.fit_reached == 0.95
    assert ("it fits its targets (95.0% at best on the pool texts it trained on; 70.0% at this "
            "evaluation), so the targets are wrong") in check.line()


def test_targets_too_close_to_the_threshold_to_decide_are_left_out_of_the_fit():
    # Cells (0, 1) = 0.55 and (1, 1) = 0.45 decide nothing; the student is on the other side of
    # both. The four decisive cells (0.9 yes, 0.1 no, 0.8 yes, 0.2 no) it decides alike: 1.0.
    # Counting the two coin flips: TP 2, FP 1 (text 1), FN 1 (text 0): 4 / (4 + 2) = 2/3.
    targets = torch.tensor([[0.9, 0.55], [0.1, 0.45], [0.8, 0.2]])
    student = torch.tensor([[0.7, 0.4], [0.3, 0.6], [0.6, 0.1]])
    assert thresholded_fit(student, targets) == 1.0
    assert thresholded_fit(student, targets, ambiguity=0.0) == pytest.approx(2 / 3)
    assert micro_f1(student > 0.5, targets > 0.5) == pytest.approx(2 / 3)


def test_the_check_counts_a_label_taught_only_where_its_targets_decide_yes():
    # Four texts. Label a: targets 0.9, 0.7, 0.2, 0.1 -> two decisive yes of four, 0.5. Label b:
    # 0.55, 0.52, 0.58, 0.1 -> over 0.5 on three texts, but none at 0.6 or more: never taught.
    targets = torch.tensor([[0.9, 0.55], [0.7, 0.52], [0.2, 0.58], [0.1, 0.1]])
    assert decisive_yes(targets).tolist() == [[True, False], [True, False], [False, False],
                                              [False, False]]
    taught = SimpleNamespace(label_ids=None, targets=targets, labels=["a", "b"])
    assert MultiLabelStudent().target_shares(taught).tolist() == [0.5, 0.0]
    # A multi-task layout: a single-label task (argmax shares) beside this multi-label one.
    heads = (Head("topic", "single-label", ("x", "y"), 0, 2),
             Head("tags", "multi-label", ("a", "b"), 2, 4))
    both = torch.cat([torch.tensor([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1]]), targets], 1)
    shares = MultiTaskStudent(heads).target_shares(SimpleNamespace(label_ids=None, targets=both))
    assert shares.tolist() == [0.75, 0.25, 0.5, 0.0]
    # The sigmoid budget still counts every yes over 0.5. On 40 texts where b is 0.55 once (2.5%,
    # over the 2% floor), seeing b as a yes 1,200 times at batch 32 takes 1,500 steps, capped
    # at 4x min_steps: 1,200 (kiwb.core.training_defaults.label_exposure_steps); counting
    # decisive yes alone, b would not count and 3x would do.
    rare = torch.tensor([[0.9, 0.55]] + [[0.9, 0.1]] * 39)
    steps, why = MultiLabelStudent().min_steps(
        SimpleNamespace(label_ids=None, targets=rare, labels=["a", "b"]), 32, 300)
    assert steps == 1200 and "its rarest, b (yes on 2.5% of the texts)" in why


def test_a_uhc_students_fit_reads_each_teachers_labels_by_hand():
    # Union (a, b, c, d); teacher 1 knows a, b and teacher 2 knows c, d. Two texts. The UHC
    # targets: text 0: teacher 1 says a, teacher 2 says d; text 1: teacher 1 says b, teacher 2
    # says c. The student's logits: text 0 tops a among (a, b) and c among (c, d); text 1
    # tops b and c. Right on 3 of the 4 (text, teacher) pairs: 0.75.
    coverage = torch.tensor([[True, True, False, False], [False, False, True, True]])
    targets = torch.tensor([[[0.9, 0.1, 0.0, 0.0], [0.0, 0.0, 0.2, 0.8]],
                            [[0.3, 0.7, 0.0, 0.0], [0.0, 0.0, 0.6, 0.4]]])
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.1], [0.0, 3.0, 1.0, -1.0]])
    assert per_teacher_agreement(logits, targets, coverage) == 0.75
    assert per_teacher_agreement(logits[:0], targets[:0], coverage) == 0.0
