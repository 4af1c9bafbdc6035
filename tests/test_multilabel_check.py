"""The multi-label student's learning check, against cases worked out by hand."""

from __future__ import annotations

from kiwb.kinds.multilabel.check import check_label_rates


def test_a_label_the_targets_give_often_and_the_student_never_says_is_collapsed():
    labels = ["toxic", "insult", "threat"]
    # targets say yes to toxic on 30% of texts, insult 5%, threat 1% (under the 2% floor)
    rates = [0.30, 0.05, 0.01]
    check = check_label_rates(labels, [40, 0, 0], 100, rates, "eval texts")
    assert check.status == "collapsed" and check.collapsed == ("insult",)  # threat is too rare
    assert "never predicts insult on 100 eval texts" in check.problem
    assert "insult 5%" in check.problem
    assert check_label_rates(labels, [40, 3, 0], 100, rates, "eval texts").status == "ok"
    pool = check_label_rates(labels, [0, 2, 0], None, rates, "pool texts")
    assert pool.collapsed == ("toxic",) and "on the pool texts" in pool.problem
