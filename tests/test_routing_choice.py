"""`routing = "auto"` (kiwb.core.routing_choice, kiwb.kinds.sequence.routing_choice): the pick
on labeled texts against figures worked out by hand, the honest (cross-validated) figure, and
the record naming the routing chosen."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kiwb.core.routing_choice import (
    MIN_LABELED_TEXTS,
    Candidate,
    candidates,
    choose_on_labels,
    right_matrix,
)
from kiwb.kinds.sequence.integration import scores_from_arrays
from kiwb.kinds.sequence.routing_choice import choose_routing, labeled_for_choice
from kiwb.project.records import IntegrationSettings, RoutingChoice


def test_the_plain_pick_is_the_routing_right_most_often_and_the_earliest_on_a_tie():
    right = torch.tensor([[1, 1, 0], [0, 1, 1], [1, 1, 1], [0, 0, 1]], dtype=torch.bool)
    # accuracies 2/4, 3/4, 3/4: the second and third tie, the second comes first
    outcome = choose_on_labels(right, z=0.0)
    assert outcome.accuracies == pytest.approx((0.5, 0.75, 0.75))
    assert outcome.chosen == 1 and outcome.texts == 4


def test_the_label_free_choice_stays_unless_the_labels_say_another_is_better():
    # 100 texts; candidate 0 (the label-free choice) right on the first 60. Candidate 1 right
    # on the first 62: paired differences +1 on 2 texts, mean .02, standard deviation
    # sqrt((2 (.98)^2 + 98 (.02)^2) / 99) = .1407, standard error .01407: .02 < 2 x .01407.
    # Candidate 2 right on the first 80: mean .2, sd sqrt((20 (.8)^2 + 80 (.2)^2) / 99) = .402,
    # se .0402: .2 > 2 x .0402, so it replaces it.
    first = lambda count: torch.arange(100) < count  # noqa: E731
    assert choose_on_labels(torch.stack([first(60), first(62)], 1)).chosen == 0
    assert choose_on_labels(torch.stack([first(60), first(62), first(80)], 1)).chosen == 2
    assert choose_on_labels(torch.stack([first(60), first(62)], 1), z=1.0).chosen == 1


def test_the_reported_figure_is_measured_on_texts_the_pick_did_not_see():
    # Two texts, two routings, each right on one text: on all texts both are at 50%. Picked on
    # either text alone, the routing right on it is wrong on the other: 0% held out, which is
    # what picking this way is worth here.
    right = torch.tensor([[True, False], [False, True]])
    outcome = choose_on_labels(right, z=0.0)
    assert outcome.accuracies[outcome.chosen] == 0.5
    assert outcome.cross_validated == 0.0
    assert outcome.optimism == 0.5


def test_a_routing_better_everywhere_keeps_its_figure_held_out():
    right = torch.tensor([[True, False]] * 6 + [[True, True]] * 4)
    outcome = choose_on_labels(right)
    assert outcome.chosen == 0 and outcome.cross_validated == 1.0 and outcome.optimism == 0.0


def test_picking_among_coin_flips_is_optimistic_on_its_own_texts_and_not_held_out():
    # 30 routings each right on a random half of 200 texts: the best of them looks better
    # than 50% on those texts, and the cross-validated figure says what it is worth
    generator = torch.Generator().manual_seed(3)
    right = torch.rand(200, 30, generator=generator) < 0.5
    outcome = choose_on_labels(right, z=0.0)
    assert outcome.accuracies[outcome.chosen] > 0.55
    assert abs(outcome.cross_validated - 0.5) < 0.03


def test_the_same_labeled_texts_give_the_same_figure():
    right = torch.rand(50, 4, generator=torch.Generator().manual_seed(1)) < 0.7
    assert choose_on_labels(right) == choose_on_labels(right)


def test_right_matrix_reads_the_top_scored_teacher_against_the_label():
    coverage = torch.tensor([[True, True, False], [False, False, True]])  # teacher 0: labels 0, 1
    first = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])   # routes 0, 1, 0
    second = torch.tensor([[0.1, 0.9], [0.7, 0.3], [0.3, 0.7]])  # routes 1, 0, 1
    found = right_matrix([first, second], torch.tensor([1, 2, 2]), coverage)
    assert found.tolist() == [[True, False], [True, False], [False, True]]


def test_candidates_are_every_label_free_routing_mc_and_plain():
    names = [option.name for option in candidates()]
    assert names[:2] == ["confidence", "confidence (plain)"]
    assert {"rank", "rank (plain)", "mahalanobis", "knn", "energy"} <= set(names)
    assert "stacked" not in names            # it needs labels to fit on
    assert "mahalanobis (plain)" not in names               # no dropout to switch off
    # the no-MC ablation: only the plain confidences, so it still says what MC buys
    assert all(option.name.endswith("(plain)") for option in candidates(mc=False))
    # scores without representations: the routings reading them are left out, energy is not
    names = [option.name for option in candidates(representations=False)]
    assert "mahalanobis" not in names and "knn" not in names and "energy" in names
    for option in candidates():
        assert Candidate.parse(option.name) == option


def _pair_known_by_representation(n: int = 40):
    """Two teachers whose outputs say nothing of whose labels a text has: every text gets a
    confident class with a random margin, in or out of the teacher's labels. Their
    representations do: texts of teacher A's labels (a, b) sit near (3, 0) in A's space and
    teacher B's (c, d) near (0, 3), the other way round in B's."""
    generator = torch.Generator().manual_seed(n)
    own = torch.randn(n, 2, generator=generator) * 0.3 + torch.tensor([3.0, 0.0])
    far = torch.randn(n, 2, generator=generator) * 0.3 + torch.tensor([0.0, 3.0])
    reps = [torch.cat([own, far]), torch.cat([far.flip(0), own.flip(0)])]
    arrays = []
    for _ in range(2):
        margin = 1 + 4 * torch.rand(2 * n, generator=generator)
        said = torch.randint(0, 2, (2 * n,), generator=generator)
        teacher_logits = torch.stack([margin * (said == 0), margin * (said == 1)], dim=1)
        probs = teacher_logits.softmax(1)
        arrays.append({"mc_confidence": probs.max(1).values.numpy(),
                       "det_confidence": probs.max(1).values.numpy(),
                       "mutual_information": np.zeros(2 * n, dtype=np.float32),
                       "det_probs": probs.numpy(), "det_logits": teacher_logits.numpy(),
                       "mc_probs": probs.numpy()})
    labels = ["a"] * (n // 2) + ["b"] * (n // 2) + ["c"] * (n // 2) + ["d"] * (n // 2)
    scores = scores_from_arrays(["A", "B"], [("a", "b"), ("c", "d")], arrays, labels, ["k1", "k2"])
    scores.representations = reps
    return scores


def test_auto_takes_the_routing_that_routes_best_on_labeled_texts_and_records_the_table():
    pool = _pair_known_by_representation()
    labeled = _pair_known_by_representation(n=MIN_LABELED_TEXTS)  # the eval set: same teachers
    settings = IntegrationSettings(routing="auto")
    resolved, choice = choose_routing(settings, pool, labeled, "eval")
    assert choice.basis == "labels" and choice.labeled_texts == 2 * MIN_LABELED_TEXTS
    best = max(choice.table.values())
    assert choice.table[choice.chosen] == best and best >= 0.95
    assert choice.table["confidence"] < 0.7 and choice.table["rank"] < 0.7  # outputs: chance
    # the routings that read the representation (joint first: the label-free choice)
    assert choice.chosen in ("joint", "mahalanobis", "knn")
    assert resolved.routing == choice.routing and resolved.routing != "auto"
    assert choice.cross_validated <= best
    assert "eval" in choice.why and choice.chosen in choice.line()
    assert RoutingChoice.from_dict(choice.to_dict()) == choice


def test_too_few_labels_fall_back_to_the_label_free_choice_and_say_so():
    pool = _pair_known_by_representation()
    labeled = _pair_known_by_representation(n=4)  # 8 labeled texts
    _, choice = choose_routing(IntegrationSettings(routing="auto"), pool, labeled, "eval")
    assert choice.basis == "label-free" and choice.table is None
    assert f"{MIN_LABELED_TEXTS} or more are needed" in choice.why


def test_without_representations_the_routings_reading_them_are_left_out_and_named():
    pool = _pair_known_by_representation()
    pool.representations = None
    labeled = _pair_known_by_representation(n=MIN_LABELED_TEXTS)
    labeled.representations = None
    _, choice = choose_routing(IntegrationSettings(routing="auto"), pool, labeled, "eval",
                               representations=False)
    assert "mahalanobis" not in choice.table and "energy" in choice.table
    assert "kiwb score --representations" in choice.left_out


def test_labeled_sets_join_in_order_and_name_themselves():
    first, second = _pair_known_by_representation(n=4), _pair_known_by_representation(n=6)
    joined, where = labeled_for_choice([("eval", first), ("[data.labeled]", None),
                                        ("given labels", second)])
    assert len(joined.true_labels) == 20 and where == "eval + given labels"
    assert labeled_for_choice([("eval", None)]) == (None, "")


def test_without_labels_auto_takes_a_routing_that_holds_where_confidence_is_broken():
    """No labels: the label-free choice (the joint router over the representations), which
    routes these texts right where every confidence reads chance."""
    from kiwb.core import routing as routes

    pool = _pair_known_by_representation(n=60)
    settings, choice = choose_routing(IntegrationSettings(routing="auto"), pool, None, "")
    assert choice.basis == "label-free" and choice.chosen == "joint" == settings.routing
    owners = torch.tensor([0] * 60 + [1] * 60)
    for name, at_least, at_most in (("joint", 0.95, 1.0), ("confidence", 0.0, 0.7),
                                    ("rank", 0.0, 0.7)):
        fitted = routes.fit_routing(name, pool.features())
        share = (pool.routing_scores(fitted).argmax(1) == owners).double().mean()
        assert at_least <= share <= at_most, name
    # scores made without representations: rank on the plain confidence, said so
    pool.representations = None
    _, plain = choose_routing(IntegrationSettings(routing="auto"), pool, None, "",
                              representations=False)
    assert plain.chosen == "rank (plain)" and "joint" in plain.left_out
