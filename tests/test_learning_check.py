"""The learning check and the training defaults, against numbers worked out by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from kiwb.core.learning_check import (
    BELOW_REFERENCE,
    COLLAPSED,
    FAR_FROM_TARGETS,
    LABELS_AT_FAULT,
    OK,
    STUDENT_HINT,
    TARGETS_AT_FAULT,
    TOO_EARLY,
    TRAINING_AT_FAULT,
    WEAK_HINT,
    LearningCheck,
    check_on_eval,
    check_on_pool,
    for_method,
    judged,
    versus_reference,
    with_fit,
    with_funnel,
)
from kiwb.core.training_defaults import (
    auto_learning_rate,
    model_width,
    resolve_learning_rate,
    total_steps,
)

LABELS = ["a", "b", "c"]


def test_a_class_never_predicted_is_collapsed():
    # gold a: 5 right; gold b: 3 taken for a, 2 right; gold c: 5 taken for a. Accuracy 7/15.
    confusion = [[5, 0, 0], [3, 2, 0], [5, 0, 0]]
    check = check_on_eval(LABELS, confusion, {"a": 1.0, "b": 0.8, "c": 0.75}, 0.9)
    assert check.status == COLLAPSED and check.collapsed == ("c",) and not check.learned
    assert "never predicts c (1 of 3 classes; 46.7% on eval vs 90.0% for the Ensemble)" in check.problem
    line = check.line()
    assert line.startswith("Warning: the student has collapsed classes: never predicts c")
    assert line.endswith(STUDENT_HINT)


def test_zero_accuracy_counts_only_on_a_class_the_reference_gets_right():
    # c is predicted (twice, both times for gold b) but never right on its own 5 texts.
    confusion = [[5, 0, 0], [1, 2, 2], [5, 0, 0]]
    knows_c = check_on_eval(LABELS, confusion, {"a": 1.0, "b": 1.0, "c": 0.5}, 0.6)
    assert knows_c.collapsed == ("c",) and "0% on c, which the Ensemble gets right" in knows_c.problem
    # The Ensemble gets c wrong too (0.25 < 0.5): the student is only weak, and 7/15 < 0.6.
    not_c = check_on_eval(LABELS, confusion, {"a": 1.0, "b": 1.0, "c": 0.25}, 0.6)
    assert not_c.status == BELOW_REFERENCE and not_c.collapsed == () and not_c.learned
    assert "below the Ensemble (46.7% on eval vs 60.0% for the Ensemble)" in not_c.problem
    assert not_c.hint.endswith("try muki-hard")  # Vanilla KD's and UHC's targets can be the cause
    assert not_c.mark == " ⚠ below-reference" and LearningCheck(OK).mark == ""


def test_too_few_texts_or_a_hair_below_the_reference_is_not_flagged():
    # c has 2 eval texts, both taken for a: too few to call c collapsed. 7/11 = 63.6%.
    confusion = [[5, 0, 0], [2, 2, 0], [2, 0, 0]]
    assert check_on_eval(LABELS, confusion, {"c": 1.0}, 0.64).status == OK  # 0.4 points below
    assert check_on_eval(LABELS, confusion, {"c": 1.0}, 0.66).status == BELOW_REFERENCE
    # A handful: 4 texts of c, none right, where the reference gets all right. That happens by
    # chance 1 time in 16 at the reference's 50%: no verdict on c (5 texts is the least).
    handful = [[5, 0, 0], [0, 5, 0], [4, 0, 0]]
    assert check_on_eval(LABELS, handful, {"c": 1.0}).status == OK
    assert check_on_eval(LABELS, [[5, 0, 0], [0, 5, 0], [5, 0, 0]], {"c": 1.0}).status == COLLAPSED


@pytest.mark.parametrize(("step", "total", "verdict"), [
    (50, 300, False),   # the complaint: "collapsed" at step 50 of a run that ended at 96%
    (74, 300, False), (75, 300, True), (300, 300, True),
    (1, 2, True),       # ceil(0.5): a two-step run is judged from its first step
    (3, 3, True),
])
def test_a_verdict_waits_for_a_quarter_of_the_budget(step, total, verdict):
    assert judged(step, total) is verdict


def test_too_early_keeps_the_fit_and_says_nothing():
    early = check_on_eval(LABELS, [[5, 0, 0], [3, 2, 0], [5, 0, 0]]).too_early()
    assert early.status == TOO_EARLY and not early.flagged and early.line() == ""
    assert early.mark == "" and early.learned
    assert with_fit(LearningCheck(COLLAPSED, ("c",)), 0.5, 0.9).too_early().fit == 0.5


def test_the_class_funnel_names_where_a_collapsed_class_was_lost():
    collapsed = LearningCheck(COLLAPSED, ("b", "c"), "never predicts b, c", STUDENT_HINT)
    # b lost at routing, c never said by its owner: both before the student, so its targets
    # lacked them, whatever the fit to the targets says (here: below the floor, "training")
    lost = with_funnel(with_fit(collapsed, 0.2, 0.9), {"a": None, "b": "routing", "c": "owner"})
    assert lost.cause == TARGETS_AT_FAULT and lost.fit == 0.2
    assert lost.line().endswith(
        "; the class funnel on the eval texts loses b at the routing; c: no owning teacher "
        "says it, before training; more steps will not help: look at where the targets come "
        "from (the class funnel and routing in kiwb integrate's summary and the Uncertainty "
        "pane) and try another --routing or method")
    # both reach the targets: training loses them, even where the student fits its targets
    # overall (the rank-routing run once told "training" then "the targets" is told one thing)
    fits = with_fit(collapsed, 0.95, 0.9)
    assert fits.cause == TARGETS_AT_FAULT
    trained = with_funnel(fits, {"b": None, "c": None})
    assert trained.cause == TRAINING_AT_FAULT and trained.hint == STUDENT_HINT
    assert "; the class funnel carries b, c into the targets, so training loses them; " in trained.line()
    # the fit agrees (below the floor): its own words and figures stand
    loose = with_fit(collapsed, 0.4, 0.9)
    assert with_funnel(loose, {"b": None, "c": None}) == loose
    mixed = with_funnel(collapsed, {"b": "targets", "c": None})
    assert mixed.reason == ("the class funnel on the eval texts loses b at the targets, before "
                            "training; c reaches the targets, so training loses it")
    # once given, the funnel's cause survives a later fit (the kept checkpoint's, settled)
    assert with_fit(lost, 0.97, 0.9).reason == lost.reason
    # classes the funnel has no figure for leave the check to the fit
    assert with_funnel(collapsed, {"a": None}) == collapsed
    weak = LearningCheck(BELOW_REFERENCE, (), "below", STUDENT_HINT)
    assert with_funnel(weak, {"b": "routing"}) == weak


def test_a_supervised_student_that_fits_its_labels_is_not_told_to_train_longer():
    weak = LearningCheck(BELOW_REFERENCE, (), "below the Ensemble (…)", STUDENT_HINT)
    fitted = with_fit(weak, 0.97, 0.9, supervised=True)
    assert fitted.cause == LABELS_AT_FAULT and fitted.hint == (
        "label more texts, compare the pool's labels with the eval set's, or try a larger --student")
    assert fitted.cause_text() == ("; it fits its training labels (97.0%), so more steps will not "
                                   "help: those labels are too few, or disagree with the eval set's")
    assert with_fit(weak, 0.5, 0.9, supervised=True).cause == TRAINING_AT_FAULT


def test_a_baseline_is_told_it_is_a_baseline():
    weak = LearningCheck(BELOW_REFERENCE, (), "below the Ensemble (…)", WEAK_HINT)
    assert for_method(weak, "vanilla-kd").hint == (
        "Vanilla KD is a baseline kiwb keeps for comparison, expected to trail: train muki-hard "
        "(kiwb's default) for a student to use")
    assert for_method(weak, "uhc").hint.startswith("UHC is a baseline")
    assert for_method(weak, "muki-soft") == weak and for_method(LearningCheck(OK), "uhc") == LearningCheck(OK)


def test_every_kind_says_below_its_reference_in_the_same_words():
    owners = versus_reference(0.71, 0.778, "the owners' mean", metric="micro F1")
    assert owners.status == BELOW_REFERENCE
    assert owners.problem == "below the owners' mean (71.0% micro F1 on eval vs 77.8% for the owners' mean)"
    assert versus_reference(0.77, 0.778, "the owners' mean").status == OK  # within 1 point
    assert versus_reference(0.5, None, "the Ensemble").status == OK
    single = check_on_eval(LABELS, [[4, 1, 0], [1, 4, 0], [0, 1, 4]], reference_accuracy=0.9)
    assert single.problem == "below the Ensemble (80.0% on eval vs 90.0% for the Ensemble)"


def test_a_student_that_beats_the_reference_on_every_class_passes():
    confusion = [[4, 1, 0], [0, 5, 0], [1, 0, 3]]  # 12/14
    check = check_on_eval(LABELS, confusion, {"a": 0.6, "b": 0.6, "c": 0.6}, 0.6)
    assert check == LearningCheck(OK) and check.line() == "" and not check.flagged
    # A class without eval texts says nothing either way.
    assert check_on_eval(LABELS, [[3, 0, 0], [0, 2, 0], [0, 0, 0]]).status == OK


def test_rare_targets_turn_the_hint_to_the_method():
    confusion = [[5, 0, 0], [3, 2, 0], [5, 0, 0]]
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
    check = check_on_eval(LABELS, [[5, 0, 0], [3, 2, 0], [5, 0, 0]])
    assert check.status == COLLAPSED and LearningCheck.from_dict(check.to_dict()) == check
    explained = with_funnel(check, {"c": "routing"})
    assert LearningCheck.from_dict(explained.to_dict()) == explained
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
