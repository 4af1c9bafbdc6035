"""Adaptive MC passes: the schedule, features of pass probabilities, the jackknife standard
error and the settled rule, worked out by hand; then the rounds over passes drawn ahead."""

from __future__ import annotations

import math

import pytest
import torch

from kiwb.core.adaptive_passes import (
    Spread,
    features_of,
    routing_spread,
    schedule,
    settled,
    simulate,
)
from kiwb.core.routing import fit_routing


def test_the_schedule_adds_four_passes_a_round_up_to_the_maximum():
    assert schedule(16) == [4, 8, 12, 16]
    assert schedule(6) == [4, 6]
    assert schedule(3) == [3]
    with pytest.raises(ValueError, match="at least 2"):
        schedule(1)


def test_features_of_two_passes_by_hand():
    passes = torch.tensor([[[0.8, 0.2], [0.6, 0.4]]], dtype=torch.float64)  # (n=1, K=2, C=2)
    features = features_of(torch.tensor([[2.0, 0.0]], dtype=torch.float64), passes)

    def h(p):
        return -(p * math.log(p) + (1 - p) * math.log(1 - p))

    assert features.mc_probs[0].tolist() == pytest.approx([0.7, 0.3])
    assert float(features.mc_confidence) == pytest.approx(1 - h(0.7) / math.log(2))
    assert float(features.mutual_information) == pytest.approx(h(0.7) - (h(0.8) + h(0.6)) / 2)
    det = 1 / (1 + math.exp(-2.0))  # softmax of logits (2, 0)
    assert float(features.det_confidence) == pytest.approx(1 - h(det) / math.log(2))


def test_the_jackknife_error_of_a_mean_is_the_sample_deviation_over_root_k():
    # A "routing" that scores teacher 1 by its mean probability of class 0: the jackknife
    # standard error of a mean is the sample standard deviation over sqrt(K).
    values = [0.2, 0.4, 0.6, 0.8]
    passes = torch.tensor([[[v, 1 - v] for v in values]], dtype=torch.float64)
    det = torch.zeros(1, 2, dtype=torch.float64)

    def score_of(features):
        return torch.stack([features[0].mc_probs[:, 0], features[1].mc_probs[:, 0]], dim=1)

    spread = routing_spread(score_of, [det, det], [passes, passes.flip(1)])
    deviation = math.sqrt(sum((v - 0.5) ** 2 for v in values) / 3)
    assert spread.scores[0].tolist() == pytest.approx([0.5, 0.5])
    assert spread.errors[0].tolist() == pytest.approx([deviation / 2, deviation / 2])


def test_a_decision_is_settled_when_the_leader_z_errors_down_beats_the_rest_z_errors_up():
    spread = Spread(torch.tensor([[0.9, 0.3, 0.1], [0.5, 0.45, 0.0]], dtype=torch.float64),
                    torch.tensor([[0.1, 0.1, 0.3], [0.01, 0.01, 0.0]], dtype=torch.float64))
    # text 1: 0.9 - 0.2 = 0.7 against max(0.3 + 0.2, 0.1 + 0.6) = 0.7: not beaten
    # text 2: 0.5 - 0.02 = 0.48 against 0.45 + 0.02 = 0.47: settled
    assert settled(spread, 2.0).tolist() == [False, True]
    assert settled(spread, 1.0).tolist() == [True, True]   # 0.8 > max(0.4, 0.4)
    assert settled(spread, 3.0).tolist() == [False, False]  # 0.47 < 0.48


def test_rounds_stop_on_agreeing_passes_and_go_on_where_teachers_are_close():
    torch.manual_seed(0)
    n, k = 6, 16
    det = [torch.zeros(n, 2, dtype=torch.float64), torch.zeros(n, 2, dtype=torch.float64)]
    # Texts 0-2: teacher A sure every pass, B unsure every pass (no spread: settled at once).
    # Texts 3-5: both teachers hover around the same confidence pass after pass.
    sure = torch.tensor([0.99, 0.01], dtype=torch.float64).expand(3, k, 2)
    unsure = torch.tensor([0.55, 0.45], dtype=torch.float64).expand(3, k, 2)
    noisy = 0.5 + 0.45 * (2 * torch.rand(2, 3, k, dtype=torch.float64) - 1)
    hovering = [torch.stack([noisy[t], 1 - noisy[t]], dim=2) for t in range(2)]
    passes = [torch.cat([sure, hovering[0]]), torch.cat([unsure, hovering[1]])]

    def fit(first_round):
        fitted = fit_routing("rank", first_round)
        return fitted.scores

    result = simulate(fit, det, passes, maximum=k, z=2.0)
    assert result.passes[:3].tolist() == [4, 4, 4]
    assert (result.passes[3:] > 4).all()
    assert result.passes.max() <= k
    # The features are those of the passes each text got.
    used = int(result.passes[3])
    assert result.features[0].mc_probs[3].tolist() == pytest.approx(
        passes[0][3, :used].mean(0).tolist())
