"""Rare classes: the class funnel, the class priors and the corrections, against numbers worked
out by hand (kiwb.core.class_funnel, kiwb.core.class_priors, class-rank routing)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from kiwb.core import class_funnel, class_priors
from kiwb.core.integration import muki_hard_targets
from kiwb.core.labels import label_positions, union_labels
from kiwb.core.routing import TeacherFeatures, empirical_cdf, fit_class_rank, fit_routing
from kiwb.project.records import RECALL_STEPS, ClassFunnel, LabeledFunnel, losing_step


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def close(actual, expected, atol: float = 1e-6) -> None:
    assert_close(actual.double(), t(expected), rtol=0.0, atol=atol)


# Three teachers, b shared by T0 and T2: union a, b, c, d, e = 0..4.
LABEL_SETS = [("a", "b"), ("c", "d"), ("b", "e")]
UNION = union_labels(LABEL_SETS)
POSITIONS = label_positions(LABEL_SETS, UNION)
DET_PROBS = [
    t([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.6, 0.4]]),  # T0 says a, b, a, a
    t([[0.5, 0.5], [0.1, 0.9], [0.8, 0.2], [0.4, 0.6]]),  # T1 says c (tie: first), d, c, d
    t([[0.3, 0.7], [0.6, 0.4], [0.1, 0.9], [0.7, 0.3]]),  # T2 says e, b, e, b
]
# Routed: x0 -> T1, x1 -> T0, x2 -> T2, x3 -> T2.
CONFIDENCES = t([[0.1, 0.9, 0.2], [0.9, 0.1, 0.2], [0.1, 0.2, 0.9], [0.1, 0.2, 0.9]])
WEIGHTS = t([1.0, 0.5, 0.5, 1.0])


def three_teacher_funnel():
    top = class_funnel.teacher_top_classes(DET_PROBS, POSITIONS)
    routed = CONFIDENCES.argmax(1)
    targets = muki_hard_targets(CONFIDENCES, DET_PROBS, POSITIONS, len(UNION))
    return top, routed, targets


def test_teacher_top_classes_in_union_indices():
    top, _, _ = three_teacher_funnel()
    assert top.tolist() == [[0, 2, 4], [1, 3, 1], [0, 2, 4], [0, 3, 1]]


def test_pool_funnel_by_hand():
    top, routed, targets = three_teacher_funnel()
    found = class_funnel.pool_funnel(top, routed, targets, WEIGHTS, len(UNION))
    # a: T0 says it on x0, x2, x3; b: T0 on x1, T2 on x1 and x3 (x1 counted once).
    assert found["owner_says"] == [3, 2, 2, 2, 2]
    # The routed teacher's top class: x0 c (T1), x1 b (T0), x2 e (T2), x3 b (T2).
    assert found["routed_to_owner"] == [0, 2, 1, 0, 1]
    # Targets: x0 T1's (.5, .5) over c, d -> c on top; x1 b; x2 e; x3 b.
    assert found["target_texts"] == [0, 2, 1, 0, 1]
    # Mass at weights (1, .5, .5, 1), total 3: a .5*.3; b .5*.7 + .5*.1 + .7; c .5; d .5;
    # e .5*.9 + .3.
    close(t(found["target_share"]), [0.15 / 3, 1.1 / 3, 0.5 / 3, 0.5 / 3, 0.75 / 3])


def test_labeled_funnel_by_hand():
    top, routed, targets = three_teacher_funnel()
    gold = torch.tensor([2, 1, 0, 3])  # x0 c, x1 b, x2 a, x3 d
    found = class_funnel.labeled_funnel(top, routed, targets, gold, len(UNION))
    assert found["gold"] == [1, 1, 1, 1, 0]
    assert found["owner_recall"] == [1.0, 1.0, 1.0, 1.0, None]  # an owner says each one
    # x2 (a) goes to T2, which says e; x3 (d) goes to T2, which says b.
    assert found["routed_recall"] == [0.0, 1.0, 1.0, 0.0, None]
    assert found["target_recall"] == [0.0, 1.0, 1.0, 0.0, None]


@pytest.mark.parametrize("recalls, expected", [
    ((1.0, 0.0, 0.0, 0.0), "routing"),
    ((0.9, 0.8, 0.7, 0.1), "student"),
    ((0.3, 0.3, 0.3, 0.3), "owner"),
    ((0.9, 0.6, 0.25, 0.2), "targets"),   # .6 -> .25 keeps under half
    ((0.9, 0.8, 0.7, 0.6), None),
    ((None, 0.8, 0.7, None), None),
    ((1.0, 0.0, 0.0, None), "routing"),    # no student yet
])
def test_losing_step(recalls, expected):
    assert losing_step(*recalls) == expected


def test_funnel_rows_name_the_step_that_loses_a_class():
    funnel = ClassFunnel(
        labels=["a", "b"], owners={"a": ["T0"], "b": ["T1"]}, num_texts=10,
        owner_says=[4, 6], routed_to_owner=[1, 6], target_texts=[1, 9],
        target_share=[0.1, 0.9], estimated_share=[0.4, 0.6],
        labeled=LabeledFunnel(where="eval", gold=[5, 5], owner_recall=[0.8, 1.0],
                              routed_recall=[0.2, 1.0], target_recall=[0.2, 1.0]))
    rows = funnel.rows({"a": 0.0, "b": 0.9})
    assert rows[0]["routed to it"] == "1 (25%)"
    assert (rows[0]["est. share"], rows[0]["target share"]) == ("40.0%", "10.0%")
    assert [rows[0][step] for step in RECALL_STEPS] == ["80%", "20%", "20%", "0%"]
    assert rows[0]["lost at"] == "routing"
    assert rows[1]["lost at"] == ""
    assert "student recall" not in funnel.rows()[0]  # no run yet
    assert "lost at" not in ClassFunnel.from_dict({**funnel.to_dict(), "labeled": None}).rows()[0]


# ---- class priors ---------------------------------------------------------------------------

def test_union_prior_by_hand():
    owned = t([[0.75, 0.25], [0.5, 0.5]])
    padded = torch.stack([t([[0.8, 0.2, 0, 0], [0.1, 0.9, 0, 0]]),
                          t([[0, 0, 0.6, 0.4], [0, 0, 1.0, 0]])], dim=1)  # (n, N, |Y|)
    # x0: .75 (.8, .2, 0, 0) + .25 (0, 0, .6, .4) = (.6, .15, .15, .1)
    # x1: .5 (.1, .9, 0, 0) + .5 (0, 0, 1, 0) = (.05, .45, .5, 0); mean of both:
    close(class_priors.union_prior(owned, padded), [0.325, 0.3, 0.325, 0.05])


def test_ownership_normalises_calibrated_scores_and_softmaxes_confidences():
    close(class_priors.ownership(t([[0.6, 0.2], [0.0, 0.0]]), True, 0.2), [[0.75, 0.25], [0.5, 0.5]])
    # softmax((.9, .5) / .2) = (e^2, 1) / (e^2 + 1)
    close(class_priors.ownership(t([[0.9, 0.5]]), False, 0.2), [[0.880797, 0.119203]])


def test_target_prior_weighs_texts_and_averages_uhc():
    close(class_priors.target_prior(t([[1, 0], [0, 1]]), t([3, 1])), [0.75, 0.25])
    uhc = t([[[1, 0], [0, 1]], [[1, 0], [1, 0]]])  # (n, N, |Y|): means (.5, .5), (1, 0)
    close(class_priors.target_prior(uhc, t([1, 1])), [0.75, 0.25])
    close(class_priors.target_prior(t([[1, 0]]), t([0])), [0.5, 0.5])  # nothing weighs: uniform


@pytest.mark.parametrize("power, expected", [
    (0.0, [1, 1, 1, 1]),
    # shares x |Y| = (1.5, 1.5, 1.5, .5): 1 / that = (2/3, 2/3, 2/3, 2), total 4 kept
    (1.0, [2 / 3, 2 / 3, 2 / 3, 2.0]),
    # 1 / sqrt: (.816497 x3, 1.414214), total 3.863703, scaled by 4 / 3.863703
    (0.5, [0.845299, 0.845299, 0.845299, 1.464102]),
])
def test_class_balance_weights_by_hand(power, expected):
    found = class_priors.class_balance_weights(t([1, 1, 1, 1]), torch.tensor([0, 0, 0, 1]),
                                               t([0.75, 0.25]), power)
    close(found, expected)


# ---- class-rank routing --------------------------------------------------------------------

def _features(confidences, classes) -> TeacherFeatures:
    logits = torch.nn.functional.one_hot(torch.tensor(classes), 2).double() * 5
    values = t(confidences)
    return TeacherFeatures(values, values, torch.zeros(len(values), dtype=torch.float64), logits)


def test_class_rank_reads_a_class_against_its_own_answers():
    # 20 answers of class 0 at .80 ... .99, 20 of class 1 at .40 ... .59.
    confidences = [0.80 + 0.01 * k for k in range(20)] + [0.40 + 0.01 * k for k in range(20)]
    pool = _features(confidences, [0] * 20 + [1] * 20)
    router = fit_class_rank(pool, use_mc=True)
    new = _features([0.5, 0.9], [1, 0])
    # 0.50 among class 1's: 10 below, 11 at or below -> 21 / 40; 0.90 among class 0's: the same.
    close(router.scores(new), [0.525, 0.525])
    # Plain rank reads both against all 40: 21 / 80 and 61 / 80.
    plain = empirical_cdf(t(sorted(confidences)), t([0.5, 0.9]))
    close(plain, [0.2625, 0.7625])


def test_class_rank_reads_a_rare_class_against_every_answer():
    confidences = [0.80 + 0.01 * k for k in range(20)] + [0.5]
    pool = _features(confidences, [0] * 20 + [1])
    router = fit_class_rank(pool, use_mc=True)  # class 1 said once: under 20, so all 21 count
    close(router.scores(_features([0.5], [1])), [0.5 / 21])
    fitted = fit_routing("class-rank", [pool, pool])
    assert fitted.probabilistic and fitted.scores([pool, pool]).shape == (21, 2)
