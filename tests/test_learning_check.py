"""The learning check and the training defaults, against numbers worked out by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from kiwb.core.learning_check import (
    BELOW_REFERENCE,
    COLLAPSED,
    FAR_FROM_TARGETS,
    OK,
    STUDENT_HINT,
    LearningCheck,
    check_on_eval,
    check_on_pool,
)
from kiwb.core.training_defaults import (
    auto_learning_rate,
    model_width,
    resolve_learning_rate,
    total_steps,
)

LABELS = ["a", "b", "c"]


def test_a_class_never_predicted_is_collapsed():
    # gold a: 5 right; gold b: 3 taken for a, 2 right; gold c: 4 taken for a. Accuracy 7/14.
    confusion = [[5, 0, 0], [3, 2, 0], [4, 0, 0]]
    check = check_on_eval(LABELS, confusion, {"a": 1.0, "b": 0.8, "c": 0.75}, 0.9)
    assert check.status == COLLAPSED and check.collapsed == ("c",) and not check.learned
    assert "never predicts c (1 of 3 classes; 50.0% on eval vs 90.0% for the Ensemble)" in check.problem
    line = check.line()
    assert line.startswith("Warning: the student has collapsed classes: never predicts c")
    assert line.endswith(STUDENT_HINT)


def test_zero_accuracy_counts_only_on_a_class_the_reference_gets_right():
    # c is predicted (twice, both times for gold b) but never right on its own 4 texts.
    confusion = [[5, 0, 0], [1, 2, 2], [4, 0, 0]]
    knows_c = check_on_eval(LABELS, confusion, {"a": 1.0, "b": 1.0, "c": 0.5}, 0.6)
    assert knows_c.collapsed == ("c",) and "0% on c, which the Ensemble gets right" in knows_c.problem
    # The Ensemble gets c wrong too (0.25 < 0.5): the student is only weak, and 7/14 < 0.6.
    not_c = check_on_eval(LABELS, confusion, {"a": 1.0, "b": 1.0, "c": 0.25}, 0.6)
    assert not_c.status == BELOW_REFERENCE and not_c.collapsed == () and not_c.learned
    assert "below the Ensemble (50.0% on eval vs 60.0% for the Ensemble)" in not_c.problem
    assert not_c.hint.endswith("try muki-hard")  # Vanilla KD's and UHC's targets can be the cause
    assert not_c.mark == " ⚠ below-reference" and LearningCheck(OK).mark == ""


def test_too_few_texts_or_a_hair_below_the_reference_is_not_flagged():
    # c has 2 eval texts, both taken for a: too few to call c collapsed. 7/11 = 63.6%.
    confusion = [[5, 0, 0], [2, 2, 0], [2, 0, 0]]
    assert check_on_eval(LABELS, confusion, {"c": 1.0}, 0.64).status == OK  # 0.4 points below
    assert check_on_eval(LABELS, confusion, {"c": 1.0}, 0.66).status == BELOW_REFERENCE


def test_a_student_that_beats_the_reference_on_every_class_passes():
    confusion = [[4, 1, 0], [0, 5, 0], [1, 0, 3]]  # 12/14
    check = check_on_eval(LABELS, confusion, {"a": 0.6, "b": 0.6, "c": 0.6}, 0.6)
    assert check == LearningCheck(OK) and check.line() == "" and not check.flagged
    # A class without eval texts says nothing either way.
    assert check_on_eval(LABELS, [[3, 0, 0], [0, 2, 0], [0, 0, 0]]).status == OK


def test_rare_targets_turn_the_hint_to_the_method():
    confusion = [[5, 0, 0], [3, 2, 0], [4, 0, 0]]
    # c holds 1% of the targets (< min(0.02, 1/12)): no training length would teach it.
    check = check_on_eval(LABELS, confusion, target_shares=[0.6, 0.39, 0.01])
    assert check.hint == ("the training targets pick c for only 1.0% of the texts, so more steps "
                          "will not help: the teachers or the routing seldom give it (try another "
                          "--routing or method), or the pool holds few texts of it")
    trained_c = check_on_eval(LABELS, confusion, target_shares=[0.5, 0.3, 0.2])
    assert trained_c.hint == STUDENT_HINT


def test_pool_check_compares_predicted_and_target_shares():
    # Targets 50/30/20; predictions all a: b and c are never predicted; TV = 0.5.
    check = check_on_pool(LABELS, [10, 0, 0], [0.5, 0.3, 0.2])
    assert check.collapsed == ("b", "c")
    assert "never predicts b, c on 10 pool texts" in check.problem and "by 0.50" in check.problem
    # Every class predicted, but 80/10/10 against 40/30/30: TV 0.4 > 0.3 is weak.
    far = check_on_pool(LABELS, [8, 1, 1], [0.4, 0.3, 0.3])
    assert far.status == FAR_FROM_TARGETS and "by 0.40" in far.problem
    near = check_on_pool(LABELS, [5, 3, 2], [0.4, 0.3, 0.3])  # TV 0.1
    assert near.status == OK
    # A class the targets hardly hold (1%) may go unpredicted.
    assert check_on_pool(LABELS, [6, 4, 0], [0.6, 0.39, 0.01]).status == OK


def test_a_check_survives_its_dict_form():
    check = check_on_eval(LABELS, [[5, 0, 0], [3, 2, 0], [4, 0, 0]])
    assert LearningCheck.from_dict(check.to_dict()) == check
    assert LearningCheck.from_dict(None) is None


@pytest.mark.parametrize(("hidden", "rate"), [
    (768, 2e-5),        # BERT-base: the paper's rate
    (384, 8e-5),        # MiniLM-L6: 2e-5 * 2^2
    (1024, 1.125e-5),   # BERT-large: 2e-5 * (0.75)^2
    (128, 7.2e-4),      # a 2-layer 128-wide BERT: 2e-5 * 6^2
    (64, 2.88e-3),      # the demo's base: 2e-5 * 12^2
    (32, 3e-3),         # capped
    (4096, 1e-5),       # floored
    (None, 2e-5),       # width unknown
])
def test_auto_learning_rate_follows_the_width(hidden, rate):
    assert math.isclose(auto_learning_rate(hidden), rate, rel_tol=1e-9)


def test_the_width_is_read_under_each_family_name():
    assert model_width(SimpleNamespace(hidden_size=384)) == 384
    assert model_width(SimpleNamespace(dim=768)) == 768  # DistilBERT
    assert model_width(SimpleNamespace(d_model=512)) == 512
    assert model_width(SimpleNamespace()) is None
    assert resolve_learning_rate(1e-4, SimpleNamespace(hidden_size=64)) == (1e-4, "set in [training]")
    rate, how = resolve_learning_rate("auto", SimpleNamespace(hidden_size=384))
    assert math.isclose(rate, 8e-5) and how == "auto, for hidden size 384"


@pytest.mark.parametrize(("texts", "batch", "epochs", "minimum", "steps"), [
    (2000, 32, 3.0, 0, 189),        # ceil(2000 / 32) = 63 steps an epoch, 3 epochs
    (2000, 32, 3.0, 300, 300),      # raised to the minimum: 4.8 epochs
    (100_000, 32, 3.0, 300, 9375),  # a large pool is not touched
    (10, 32, 0.5, 0, 1),            # at least one step
])
def test_total_steps(texts, batch, epochs, minimum, steps):
    assert total_steps(texts, batch, epochs, minimum) == steps
