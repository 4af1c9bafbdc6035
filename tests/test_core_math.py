"""Hand-computed checks of kiwb.core: uncertainty, label alignment, integration and losses."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from kiwb.core.choices import INTEGRATION_METHODS
from kiwb.core.integration import (
    concatenated_logit_probs,
    integrate,
    muki_hard_targets,
    muki_soft_targets,
    pad_to_union,
    routed_teacher,
    routing_accuracy,
    routing_margin,
    uhc_targets,
)
from kiwb.core.labels import (
    coverage_mask,
    gold_label_ids,
    label_positions,
    overlapping_labels,
    union_labels,
)
from kiwb.core.losses import uhc_loss, weighted_kl_loss
from kiwb.core.uncertainty import confidence, entropy, mutual_information, summarize_passes
from kiwb.errors import DataError

LN2 = math.log(2)  # 0.693147
LN3 = math.log(3)  # 1.098612
# Softmax of (0.9, 0.5) / 0.2 = (4.5, 2.5): w1 = 1 / (1 + e^-2) = 0.880797, w2 = 0.119203.
W_HIGH, W_LOW = 0.880797, 0.119203


def close(actual, expected, atol: float = 1e-6) -> None:
    """Assert a tensor equals hand-written numbers to six decimals."""
    expected = torch.as_tensor(expected, dtype=actual.dtype)
    assert_close(actual, expected, rtol=0.0, atol=atol)


def t(values) -> torch.Tensor:
    """Float64 tensor, so six-decimal hand numbers are the only rounding in play."""
    return torch.tensor(values, dtype=torch.float64)


# Two teachers with disjoint labels: A = (a, b) -> union 0, 1; B = (c, d) -> union 2, 3.
DISJOINT_POSITIONS = [torch.tensor([0, 1]), torch.tensor([2, 3])]
DISJOINT_PROBS = [t([[0.8, 0.2], [0.6, 0.4]]), t([[0.5, 0.5], [0.1, 0.9]])]
# Text 0 trusts A by 0.4, text 1 trusts B by 0.4.
MC_CONF = t([[0.9, 0.5], [0.3, 0.7]])
# Plain-pass confidences flip the routing: text 0 -> B (margin 0.2), text 1 -> A (0.6).
DET_CONF = t([[0.4, 0.6], [0.8, 0.2]])

# Overlapping: A = (sports, world, business), B = (tech, business, sports).
# Union = (sports, world, business, tech); A -> 0, 1, 2 and B -> 3, 2, 0.
OVERLAP_SETS = [["sports", "world", "business"], ["tech", "business", "sports"]]
OVERLAP_POSITIONS = [torch.tensor([0, 1, 2]), torch.tensor([3, 2, 0])]
# Pad(q_B) = (sports .3, world 0, business .5, tech .2).
OVERLAP_PROBS = [t([[0.6, 0.3, 0.1]]), t([[0.2, 0.5, 0.3]])]


# ---------------------------------------------------------------- uncertainty


@pytest.mark.parametrize(
    ("probs", "expected_entropy", "expected_confidence"),
    [
        ([0.5, 0.5], LN2, 0.0),  # H = log 2 = log C -> c = 0
        ([1.0, 0.0], 0.0, 1.0),  # 0 log 0 = 0 -> H = 0 -> c = 1
        # H = -(0.9 ln .9 + .1 ln .1) = 0.325083; c = 1 - 0.325083 / 0.693147 = 0.531004
        ([0.9, 0.1], 0.325083, 0.531004),
        ([1 / 3, 1 / 3, 1 / 3], LN3, 0.0),  # uniform over 3: H = ln 3 -> c = 0
        ([0.0, 1.0, 0.0], 0.0, 1.0),
        # H = .5 ln 2 + 2 (.25 ln 4) = 1.5 ln 2 = 1.039721; c = 1 - 1.039721 / 1.098612 = 0.053605
        ([0.5, 0.25, 0.25], 1.039721, 0.053605),
    ],
)
def test_entropy_and_confidence(probs, expected_entropy, expected_confidence):
    close(entropy(t(probs)), expected_entropy)
    close(confidence(t(probs)), expected_confidence)


def test_entropy_and_confidence_keep_leading_shape():
    probs = t([[[0.5, 0.5], [1.0, 0.0]], [[0.9, 0.1], [0.1, 0.9]]])  # (2, 2, 2)
    close(entropy(probs), [[LN2, 0.0], [0.325083, 0.325083]])
    close(confidence(probs), [[0.0, 1.0], [0.531004, 0.531004]])


def test_confidence_rejects_single_label():
    with pytest.raises(ValueError, match="at least two labels"):
        confidence(t([[1.0]]))


# Passes (K=2, n=2, C=2). Text 0: (1, 0) then (0, 1): mean (.5, .5), H(mean) = ln 2,
# each pass H = 0 -> MI = ln 2. Text 1: (.9, .1) twice: H(mean) = mean H -> MI = 0.
PASSES = t([[[1.0, 0.0], [0.9, 0.1]], [[0.0, 1.0], [0.9, 0.1]]])


def test_mutual_information():
    close(mutual_information(PASSES), [LN2, 0.0])


def test_summarize_passes():
    summary = summarize_passes(PASSES)
    close(summary.mean_probs, [[0.5, 0.5], [0.9, 0.1]])
    close(summary.entropy, [LN2, 0.325083])
    close(summary.confidence, [0.0, 0.531004])
    close(summary.mutual_information, [LN2, 0.0])


# ---------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("label_sets", "union", "positions", "coverage", "shared"),
    [
        (
            [["a", "b"], ["c", "d"]],
            ["a", "b", "c", "d"],
            [[0, 1], [2, 3]],
            [[True, True, False, False], [False, False, True, True]],
            [],
        ),
        (
            # Same names in a different order align by name, not by index.
            OVERLAP_SETS,
            ["sports", "world", "business", "tech"],
            [[0, 1, 2], [3, 2, 0]],
            [[True, True, True, False], [True, False, True, True]],
            ["sports", "business"],
        ),
        (
            [["x", "y"], ["y", "z"], ["z", "x"]],
            ["x", "y", "z"],
            [[0, 1], [1, 2], [2, 0]],
            [[True, True, False], [False, True, True], [True, False, True]],
            ["x", "y", "z"],
        ),
    ],
)
def test_label_alignment(label_sets, union, positions, coverage, shared):
    assert union_labels(label_sets) == union
    got = label_positions(label_sets, union)
    assert [p.tolist() for p in got] == positions
    assert all(p.dtype == torch.long for p in got)
    assert torch.equal(coverage_mask(label_sets, union), torch.tensor(coverage))
    assert overlapping_labels(label_sets) == shared


# ---------------------------------------------------------------- integration


@pytest.mark.parametrize(
    ("positions", "expected"),
    [
        ([3, 1], [[0.0, 0.3, 0.0, 0.7], [0.0, 0.9, 0.0, 0.1]]),
        ([1, 1], [[0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]),  # duplicates sum
    ],
)
def test_pad_to_union(positions, expected):
    close(pad_to_union(t([[0.7, 0.3], [0.1, 0.9]]), torch.tensor(positions), 4), expected)


@pytest.mark.parametrize(
    ("confidences", "routed", "margin"),
    [
        ([[0.8], [0.25]], [0, 0], [0.8, 0.25]),  # N = 1: margin = c_max
        ([[0.9, 0.5], [0.3, 0.7]], [0, 1], [0.4, 0.4]),
        ([[0.7, 0.7], [0.1, 0.0]], [0, 0], [0.0, 0.1]),  # tie -> lowest index
        # N = 3: .9 - .6 = .3; tie .5 / .5 -> margin 0, teacher 0
        ([[0.2, 0.9, 0.6], [0.5, 0.5, 0.1]], [1, 0], [0.3, 0.0]),
    ],
)
def test_routing(confidences, routed, margin):
    assert routed_teacher(t(confidences)).tolist() == routed
    close(routing_margin(t(confidences)), margin)


@pytest.mark.parametrize(
    ("confidences", "probs", "positions", "hard", "soft"),
    [
        (
            MC_CONF,
            DISJOINT_PROBS,
            DISJOINT_POSITIONS,
            [[0.8, 0.2, 0.0, 0.0], [0.0, 0.0, 0.1, 0.9]],
            # Text 0: (.8 w1, .2 w1, .5 w2, .5 w2); text 1 swaps weights: (.6 w2, .4 w2, .1 w1, .9 w1).
            [
                [0.704638, 0.176159, 0.059601, 0.059601],
                [0.071522, 0.047681, 0.088080, 0.792717],
            ],
        ),
        (
            t([[0.9, 0.5]]),
            OVERLAP_PROBS,
            OVERLAP_POSITIONS,
            [[0.6, 0.3, 0.1, 0.0]],  # A alone, no mass from B's shared labels
            # sports .6 w1 + .3 w2 = .564239; world .3 w1 = .264239;
            # business .1 w1 + .5 w2 = .147681; tech .2 w2 = .023841
            [[0.564239, 0.264239, 0.147681, 0.023841]],
        ),
        (
            t([[0.5, 0.9]]),
            OVERLAP_PROBS,
            OVERLAP_POSITIONS,
            [[0.3, 0.0, 0.5, 0.2]],  # Pad(q_B)
            # sports .6 w2 + .3 w1 = .335761; world .3 w2 = .035761;
            # business .1 w2 + .5 w1 = .452319; tech .2 w1 = .176159
            [[0.335761, 0.035761, 0.452319, 0.176159]],
        ),
    ],
)
def test_muki_targets(confidences, probs, positions, hard, soft):
    hard_targets = muki_hard_targets(confidences, probs, positions, 4)
    soft_targets = muki_soft_targets(confidences, probs, positions, 4, tau=0.2)
    close(hard_targets, hard)
    close(soft_targets, soft)
    close(hard_targets.sum(dim=1), torch.ones(len(hard)))
    close(soft_targets.sum(dim=1), torch.ones(len(soft)))


@pytest.mark.parametrize("tau", [0.0, -0.5])
def test_muki_soft_rejects_non_positive_tau(tau):
    with pytest.raises(ValueError, match="tau"):
        muki_soft_targets(MC_CONF, DISJOINT_PROBS, DISJOINT_POSITIONS, 4, tau=tau)


@pytest.mark.parametrize(
    ("logits", "positions", "expected"),
    [
        # One teacher: plain softmax, exp (1, 3) / 4 in its own slots.
        ([[0.0, math.log(3)]], DISJOINT_POSITIONS[:1], [0.25, 0.75, 0.0, 0.0]),
        # exp: (1, 3 | 1, 1), total 6 -> (1/6, 1/2, 1/6, 1/6)
        ([[0.0, math.log(3)], [0.0, 0.0]], DISJOINT_POSITIONS, [1 / 6, 1 / 2, 1 / 6, 1 / 6]),
        # A (sports, world, business) exp (1, 2, 1); B (tech, business, sports) exp (3, 1, 1);
        # total 9: sports (1+1)/9, world 2/9, business (1+1)/9, tech 3/9
        (
            [[0.0, math.log(2), 0.0], [math.log(3), 0.0, 0.0]],
            OVERLAP_POSITIONS,
            [2 / 9, 2 / 9, 2 / 9, 1 / 3],
        ),
    ],
)
def test_concatenated_logit_probs(logits, positions, expected):
    teacher_logits = [t([row]) for row in logits]
    probs = concatenated_logit_probs(teacher_logits, positions, 4)
    close(probs, [expected])
    close(probs.sum(dim=1), [1.0])


def test_uhc_targets():
    targets = uhc_targets(OVERLAP_PROBS, OVERLAP_POSITIONS, 4)
    close(targets, [[[0.6, 0.3, 0.1, 0.0], [0.3, 0.0, 0.5, 0.2]]])  # (n=1, N=2, |Y|=4)


@pytest.mark.parametrize(
    ("coverage", "true_labels", "expected"),
    [
        # Routed (0, 1, 0, 1); A covers {0, 1}, B covers {2, 3}: hits on texts 0 and 1 -> 2/4.
        ([[True, True, False, False], [False, False, True, True]], [1, 3, 2, 0], 0.5),
        # Label 0 (sports) is shared, so either teacher is a hit; label 3 (tech) needs B.
        ([[True, True, True, False], [True, False, True, True]], [0, 0, 3, 3], 0.75),
    ],
)
def test_routing_accuracy(coverage, true_labels, expected):
    confidences = t([[0.9, 0.5], [0.3, 0.7], [0.8, 0.2], [0.1, 0.6]])
    accuracy = routing_accuracy(confidences, torch.tensor(true_labels), torch.tensor(coverage))
    assert accuracy == pytest.approx(expected, abs=1e-12)


# vanilla-kd logits = log q, so the concatenated softmax is q / (sum of all q) = q / 2.
DET_LOGITS = [probs.log() for probs in DISJOINT_PROBS]
SOFT_MC = [[0.704638, 0.176159, 0.059601, 0.059601], [0.071522, 0.047681, 0.088080, 0.792717]]


@pytest.mark.parametrize(
    ("method", "options", "targets", "weights", "routed", "margin"),
    [
        ("muki-hard", {}, [[0.8, 0.2, 0, 0], [0, 0, 0.1, 0.9]], [0.4, 0.4], [0, 1], [0.4, 0.4]),
        ("muki-soft", {}, SOFT_MC, [0.4, 0.4], [0, 1], [0.4, 0.4]),
        ("muki-soft", {"reweight": False}, SOFT_MC, [1.0, 1.0], [0, 1], [0.4, 0.4]),
        # Without MC dropout: route by DET_CONF -> text 0 to B (margin .2), text 1 to A (.6).
        (
            "muki-hard",
            {"use_mc": False},
            [[0, 0, 0.5, 0.5], [0.6, 0.4, 0, 0]],
            [0.2, 0.6],
            [1, 0],
            [0.2, 0.6],
        ),
        # Text 0: (.8, .2, .5, .5) / 2; text 1: (.6, .4, .1, .9) / 2. Never re-weighted.
        (
            "vanilla-kd",
            {},
            [[0.4, 0.1, 0.25, 0.25], [0.3, 0.2, 0.05, 0.45]],
            [1.0, 1.0],
            [0, 1],
            [0.4, 0.4],
        ),
        (
            "uhc",
            {},
            [[[0.8, 0.2, 0, 0], [0, 0, 0.5, 0.5]], [[0.6, 0.4, 0, 0], [0, 0, 0.1, 0.9]]],
            [1.0, 1.0],
            [0, 1],
            [0.4, 0.4],
        ),
    ],
)
def test_integrate(method, options, targets, weights, routed, margin):
    options = dict(options)
    # The "without MC dropout" ablation routes by the plain confidences.
    used = DET_CONF if options.pop("use_mc", True) is False else MC_CONF
    result = integrate(
        method,
        routing_scores=used,
        det_probs=DISJOINT_PROBS,
        det_logits=DET_LOGITS,
        positions=DISJOINT_POSITIONS,
        num_union=4,
        **options,
    )
    close(result.targets, targets)
    close(result.weights, weights)
    assert result.routed.tolist() == routed
    close(result.margin, margin)
    assert torch.equal(result.confidences, used)
    close(result.targets.sum(dim=-1), torch.ones(result.targets.shape[:-1]))


@pytest.mark.parametrize("method", INTEGRATION_METHODS)
def test_integrate_targets_sum_to_one_with_overlap(method):
    result = integrate(
        method,
        routing_scores=t([[0.9, 0.5], [0.2, 0.6]]),
        det_probs=[t([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]), t([[0.2, 0.5, 0.3], [0.7, 0.1, 0.2]])],
        det_logits=[t([[0.0, 1.0, 2.0], [3.0, 0.0, -1.0]]), t([[0.5, 0.0, -2.0], [1.0, 1.0, 0.0]])],
        positions=OVERLAP_POSITIONS,
        num_union=4,
    )
    close(result.targets.sum(dim=-1), torch.ones(result.targets.shape[:-1]))


def test_integrate_rejects_unknown_method():
    with pytest.raises(ValueError, match=r"'muki-medium'.*muki-hard, muki-soft, vanilla-kd, uhc"):
        integrate(
            "muki-medium",
            routing_scores=MC_CONF,
            det_probs=DISJOINT_PROBS,
            det_logits=DET_LOGITS,
            positions=DISJOINT_POSITIONS,
            num_union=4,
        )


# ---------------------------------------------------------------- losses


@pytest.mark.parametrize(
    ("logits", "targets", "weights", "expected"),
    [
        ([[0.0, 0.0]], [[1.0, 0.0]], None, LN2),  # KL((1,0) || (.5,.5)) = ln 2
        ([[1.0, -2.0, 0.5]], None, None, 0.0),  # target = student softmax -> KL 0
        # softmax(ln 3, 0) = (.75, .25): KL((.5,.5) || .) = .5 ln(.5/.75) + .5 ln(.5/.25) = .5 ln(4/3)
        ([[math.log(3), 0.0]], [[0.5, 0.5]], None, 0.143841),
        # rows ln 2 and -ln .75 = 0.287682: mean (0.693147 + 0.287682) / 2 = 0.490415
        ([[0.0, 0.0], [math.log(3), 0.0]], [[1.0, 0.0], [1.0, 0.0]], None, 0.490415),
        # weights (.5, 2): (.5 * 0.693147 + 2 * 0.287682) / 2 = 0.460969
        ([[0.0, 0.0], [math.log(3), 0.0]], [[1.0, 0.0], [1.0, 0.0]], [0.5, 2.0], 0.460969),
        ([[0.0, 0.0]], [[1.0, 0.0]], [3.0], 3 * LN2),
    ],
)
def test_weighted_kl_loss(logits, targets, weights, expected):
    logits = t(logits)
    targets = torch.softmax(logits, dim=-1) if targets is None else t(targets)
    weights = None if weights is None else t(weights)
    close(weighted_kl_loss(logits, targets, weights), expected)


DISJOINT_COVERAGE = torch.tensor([[True, True, False, False], [False, False, True, True]])
OVERLAP_COVERAGE = torch.tensor([[True, True, True, False], [True, False, True, True]])


@pytest.mark.parametrize(
    ("logits", "teacher_targets", "coverage", "weights", "expected"),
    [
        # Text 0: A slice softmax(ln 3, 0) = (.75, .25) vs (1, 0) -> ln(4/3) = 0.287682;
        #         B slice (.5, .5) vs (.5, .5) -> 0.
        # Text 1: A slice (.5, .5) vs (.5, .5) -> 0; B slice (.75, .25) vs (0, 1) -> ln 4.
        # Mean (0.287682 + 1.386294) / 2 = 0.836988.
        (
            [[math.log(3), 0, 0, 0], [0, 0, math.log(3), 0]],
            [[[1, 0, 0, 0], [0, 0, 0.5, 0.5]], [[0.5, 0.5, 0, 0], [0, 0, 0, 1]]],
            DISJOINT_COVERAGE,
            None,
            0.836988,
        ),
        # weights (2, 0): 2 * 0.287682 / 2
        (
            [[math.log(3), 0, 0, 0], [0, 0, math.log(3), 0]],
            [[[1, 0, 0, 0], [0, 0, 0.5, 0.5]], [[0.5, 0.5, 0, 0], [0, 0, 0, 1]]],
            DISJOINT_COVERAGE,
            [2.0, 0.0],
            0.287682,
        ),
        # Zero logits: each slice is uniform over 3 labels. A: (1, 0, 0) -> ln 3.
        # B: Pad(q_B) over (sports, business, tech) = (.3, .5, .2) -> ln 3 - H(.3, .5, .2)
        #    = 1.098612 - (.361192 + .346574 + .321888) = 0.068959. Sum 1.167571.
        (
            [[0.0, 0.0, 0.0, 0.0]],
            [[[1, 0, 0, 0], [0.3, 0, 0.5, 0.2]]],
            OVERLAP_COVERAGE,
            None,
            1.167571,
        ),
    ],
)
def test_uhc_loss(logits, teacher_targets, coverage, weights, expected):
    weights = None if weights is None else t(weights)
    close(uhc_loss(t(logits), t(teacher_targets), coverage, weights), expected)


def test_uhc_loss_gradient_is_finite_despite_masked_logits():
    logits = t([[0.3, -1.0, 2.0, 0.5]]).requires_grad_()
    targets = t([[[0.9, 0.1, 0, 0], [0, 0, 0.4, 0.6]]])
    uhc_loss(logits, targets, DISJOINT_COVERAGE).backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_gold_labels_map_to_union_positions_and_unknown_ones_are_named():
    union = ["world", "sports", "business"]
    assert gold_label_ids(["sports", "world", "sports"], union).tolist() == [1, 0, 1]
    with pytest.raises(DataError, match=r"gold labels 'cooking', 'music' are in no teacher's "
                                        r"label set \(world, sports, business\); fix the label column"):
        gold_label_ids(["music", "world", "cooking"], union)
