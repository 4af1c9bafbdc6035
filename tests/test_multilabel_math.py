"""Multi-label kind's math against numbers worked out by hand: per-label uncertainty, the
integrators with two and three owners, the label-dependency transfer and the metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kiwb.kinds.multilabel.integration import (
    ant_targets,
    integrate_labels,
    mean_targets,
    muki_hard_targets,
    muki_soft_targets,
    owner_margin,
    vote_targets,
)
from kiwb.kinds.multilabel.metrics import multilabel_report
from kiwb.kinds.multilabel.transfer import cooccurrence, transfer, transfer_indicator
from kiwb.kinds.multilabel.uncertainty import (
    binary_entropy,
    label_mutual_information,
    mc_label_confidence,
    plain_label_confidence,
)

H_09 = 0.9 * math.log(1 / 0.9) + 0.1 * math.log(1 / 0.1)  # 0.325083


def test_binary_entropy_mutual_information_and_confidences_by_hand():
    assert binary_entropy(torch.tensor([0.0, 0.5, 0.9, 1.0])).tolist() == pytest.approx(
        [0.0, math.log(2), H_09, 0.0], abs=1e-6)
    # Two passes 0.9 and 0.1 average to 0.5: entropy of the mean log 2, mean entropy H(0.9).
    disagreeing = torch.tensor([[0.9], [0.1]])
    agreeing = torch.tensor([[0.9], [0.9]])
    assert label_mutual_information(disagreeing).item() == pytest.approx(math.log(2) - H_09)
    assert label_mutual_information(agreeing).item() == pytest.approx(0.0, abs=1e-7)
    # 1 - (log 2 + log 2 - H(0.9)) / 2 log 2 = H(0.9) / 2 log 2 = 0.2345
    assert mc_label_confidence(disagreeing).item() == pytest.approx(H_09 / (2 * math.log(2)))
    assert mc_label_confidence(agreeing).item() == pytest.approx(1 - H_09 / (2 * math.log(2)))
    assert plain_label_confidence(torch.tensor(0.9)).item() == pytest.approx(1 - H_09 / math.log(2))


# Three texts, three union labels [shared, only A, only B]; A and B own the shared label.
PROBS = torch.tensor([
    [[0.3, 0.7, 0.0], [0.3, 0.2, 0.0], [0.5, 0.9, 0.0]],  # teacher A
    [[0.4, 0.0, 0.6], [0.8, 0.0, 0.1], [0.2, 0.0, 0.4]],  # teacher B
])
OWNERS = torch.tensor([[True, True, False], [True, False, True]])
CONFIDENCES = torch.tensor([
    [[0.9, 0.5, 0.0], [0.9, 0.6, 0.0], [0.3, 0.7, 0.0]],
    [[0.4, 0.0, 0.8], [0.4, 0.0, 0.2], [0.6, 0.0, 0.1]],
])


def test_ant_takes_the_minimum_when_every_owner_says_no_else_the_maximum():
    targets = ant_targets(PROBS, OWNERS)
    # shared: (0.3, 0.4) all <= 0.5 -> 0.3; (0.3, 0.8) -> 0.8; (0.5, 0.2) 0.5 is not > 0.5 -> 0.2
    assert targets[:, 0].tolist() == pytest.approx([0.3, 0.8, 0.2])
    # A label with one owner takes that owner's probability.
    assert targets[:, 1].tolist() == pytest.approx([0.7, 0.2, 0.9])
    assert targets[:, 2].tolist() == pytest.approx([0.6, 0.1, 0.4])


def test_vote_mean_and_muki_per_label_with_two_owners():
    # Vote: one yes of two owners is a tie, and ties are positive.
    assert vote_targets(PROBS, OWNERS).tolist() == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0],
                                                    [0.0, 1.0, 0.0]]
    assert mean_targets(PROBS, OWNERS)[:, 0].tolist() == pytest.approx([0.35, 0.55, 0.35])
    # Hard: A is more confident on the shared label of texts 0 and 1, B on text 2.
    assert muki_hard_targets(PROBS, CONFIDENCES, OWNERS)[:, 0].tolist() == pytest.approx(
        [0.3, 0.3, 0.2])
    # Soft, tau 0.2, text 1: softmax(0.9 / 0.2, 0.4 / 0.2) gives A 1 / (1 + e^-2.5) = 0.924142.
    soft = muki_soft_targets(PROBS, CONFIDENCES, OWNERS, tau=0.2)
    weight_a = 1 / (1 + math.exp(-2.5))
    assert soft[1, 0].item() == pytest.approx(weight_a * 0.3 + (1 - weight_a) * 0.8)
    assert soft[1, 1].item() == pytest.approx(0.2)  # lone owner
    # Margins: 0.9 - 0.4 = 0.5 on texts 0 and 1, 0.6 - 0.3 on text 2; a lone owner's own
    # confidence elsewhere.
    assert owner_margin(CONFIDENCES, OWNERS).flatten().tolist() == pytest.approx(
        [0.5, 0.5, 0.8, 0.5, 0.6, 0.2, 0.3, 0.7, 0.1])


def test_three_owners_of_one_label():
    probs = torch.tensor([[[0.6], [0.2]], [[0.1], [0.4]], [[0.9], [0.5]]])
    owners = torch.ones(3, 1, dtype=torch.bool)
    confidences = torch.tensor([[[0.5], [0.2]], [[0.9], [0.3]], [[0.7], [0.8]]])
    assert ant_targets(probs, owners).flatten().tolist() == pytest.approx([0.9, 0.2])
    # 2 yes of 3 -> yes; 0 of 3 -> no (0.5 is not a yes)
    assert vote_targets(probs, owners).flatten().tolist() == [1.0, 0.0]
    assert mean_targets(probs, owners).flatten().tolist() == pytest.approx([1.6 / 3, 1.1 / 3])
    assert muki_hard_targets(probs, confidences, owners).flatten().tolist() == pytest.approx(
        [0.1, 0.5])
    # Margin: best minus second best owner: 0.9 - 0.7 and 0.8 - 0.3.
    assert owner_margin(confidences, owners).flatten().tolist() == pytest.approx([0.2, 0.5])
    integration = integrate_labels("muki-hard", probs, confidences, owners)
    # both targets are no (0.1, and 0.5 is not a yes): margins over their mean 0.35
    assert integration.weights.flatten().tolist() == pytest.approx([0.2 / 0.35, 0.5 / 0.35])
    assert integration.routed.flatten().tolist() == [1, 2]
    assert integrate_labels("ant", probs, confidences, owners).weights.flatten().tolist() == [1, 1]


def test_an_unowned_label_and_an_unknown_method_are_refused():
    with pytest.raises(ValueError, match=r"union labels \[1\] have no owner"):
        ant_targets(torch.zeros(1, 2, 2), torch.tensor([[True, False]]))
    with pytest.raises(ValueError, match="unknown multi-label method 'max'"):
        integrate_labels("max", PROBS, CONFIDENCES, OWNERS)


def test_cooccurrence_is_laplace_smoothed_soft_counts():
    # Teacher B's pool, labels (c, j): c with j twice, c alone once, j alone once, neither twice.
    pool = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    stats = cooccurrence(pool)
    # P(j | c) = (2 + 1) / (3 + 2); P(j | not c) = (1 + 1) / (3 + 2)
    assert stats.given_present[0, 1].item() == pytest.approx(0.6)
    assert stats.given_absent[0, 1].item() == pytest.approx(0.4)


def test_transfer_moves_the_transferees_other_labels_by_the_pool_lift():
    # Union labels [c shared, a (A only), j (B only)]; A says c confidently, B says no.
    probs = torch.tensor([[[0.9, 0.3, 0.0]], [[0.0, 0.0, 0.5]]])
    owners = torch.tensor([[True, True, False], [True, False, True]])
    confidences = torch.tensor([[[0.8, 0.5, 0.0]], [[0.6, 0.0, 0.5]]])
    b_pool = torch.tensor([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0],
                           [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    stats = [cooccurrence(torch.rand(6, 3)), cooccurrence(b_pool)]
    assert transfer_indicator(probs, confidences, owners).tolist() == [
        [[False, False, False]], [[True, False, False]]]
    revised = transfer(probs, confidences, owners, stats)
    # B believed c absent (p_c = 0): P(j | c as believed) = 0.4, so j's odds move by
    # (0.6 / 0.4) / (0.4 / 0.6) = 2.25: 0.5 -> 2.25 / 3.25.
    assert revised[1, 0, 2].item() == pytest.approx(2.25 / 3.25, abs=1e-5)
    # Nothing else moves: the overridden label itself, teacher A, labels B does not own.
    assert revised[1, 0, :2].tolist() == [0.0, 0.0]
    assert torch.equal(revised[0], probs[0])
    # A less confident "yes" does not override a more confident "no".
    doubtful = confidences.clone()
    doubtful[0, 0, 0] = 0.5
    assert torch.equal(transfer(probs, doubtful, owners, stats), probs)


def test_metrics_by_hand():
    gold = torch.tensor([[1, 0, 1], [0, 1, 0]])
    predicted = torch.tensor([[1, 1, 0], [0, 1, 0]])
    report = multilabel_report(gold, predicted, ["x", "y", "z"])
    # x: 1 of 1 right -> F1 1; y: tp 1, 2 predicted, 1 gold -> 2/3; z: missed -> 0
    assert report["per_label_f1"] == pytest.approx({"x": 1.0, "y": 2 / 3, "z": 0.0})
    assert report["macro_f1"] == pytest.approx(5 / 9)
    assert report["micro_f1"] == pytest.approx(4 / 6)  # tp 2, 3 predicted, 3 gold
    assert report["hamming_loss"] == pytest.approx(2 / 6)
    assert report["subset_accuracy"] == pytest.approx(0.5)
    assert report["support"] == {"x": 1, "y": 1, "z": 1}


def _arrays(det, mc_confidence):
    det, confidence = np.asarray(det, dtype=np.float32), np.asarray(mc_confidence, dtype=np.float32)
    return {"det_probs": det, "mc_probs": det, "mc_confidence": confidence,
            "det_confidence": np.full_like(confidence, 0.5)}


def test_stacking_scores_on_the_union_and_the_conflicts_by_margin():
    from kiwb.kinds.multilabel.pool import (
        integrate_label_scores,
        label_conflicts,
        stack_label_scores,
    )

    # A knows (sports, music), B knows (music, jazz): music is shared.
    scores = stack_label_scores(
        ["A", "B"], [("sports", "music"), ("music", "jazz")],
        [_arrays([[0.9, 0.8], [0.1, 0.3], [0.7, 0.6]], [[0.9, 0.9], [0.8, 0.5], [0.6, 0.7]]),
         _arrays([[0.2, 0.9], [0.4, 0.1], [0.9, 0.2]], [[0.5, 0.8], [0.9, 0.9], [0.6, 0.8]])])
    assert scores.union == ["sports", "music", "jazz"]
    assert scores.owners.tolist() == [[True, True, False], [False, True, True]]
    assert scores.shared.tolist() == [False, True, False]
    assert scores.det_probs[1, 0].tolist() == pytest.approx([0.0, 0.2, 0.9])
    hard = integrate_label_scores(scores, "muki-hard")
    # music (B's first column): text 0 A 0.8 at confidence 0.9 against B 0.2 at 0.5 -> 0.8;
    # text 1 A 0.3 at 0.5 against B 0.4 at 0.9 -> 0.4; text 2 A 0.6 at 0.7 against B 0.9 at 0.6.
    assert hard.targets[:, 1].tolist() == pytest.approx([0.8, 0.4, 0.6])
    conflicts = label_conflicts(scores, hard)
    # Only text 0's owners disagree on music (yes 0.8, no 0.2); margin 0.9 - 0.5.
    assert [(c.text, c.label, c.says_yes) for c in conflicts] == [(0, "music", ["A"])]
    assert conflicts[0].margin == pytest.approx(0.4)
    assert conflicts[0].target == pytest.approx(0.8)
    plain = integrate_label_scores(scores, "muki-hard", use_mc=False)
    # Plain confidences are all 0.5: ties go to the first owner, A.
    assert plain.targets[:, 1].tolist() == pytest.approx([0.8, 0.3, 0.6])


def test_margins_weigh_yes_and_no_targets_alike_per_label():
    from kiwb.kinds.multilabel.integration import side_balanced

    # one label, four texts: yes targets with margins 0.2 and 0.4 (mean 0.3), no targets with
    # 0.6 and 0.8 (mean 0.7); a second label whose yes margins are all 0 weighs them 1
    margin = torch.tensor([[0.2, 0.0], [0.4, 0.0], [0.6, 0.5], [0.8, 0.7]])
    targets = torch.tensor([[0.9, 0.8], [0.7, 0.9], [0.1, 0.2], [0.3, 0.1]])
    weights = side_balanced(margin, targets)
    assert weights[:, 0].tolist() == pytest.approx([2 / 3, 4 / 3, 6 / 7, 8 / 7])
    assert weights[:, 1].tolist() == pytest.approx([1.0, 1.0, 5 / 6, 7 / 6])
    # each side keeps its count as its total weight, as without margins
    assert float(weights[:2, 0].sum()) == pytest.approx(2.0) and float(weights[2:, 0].sum()) == pytest.approx(2.0)
