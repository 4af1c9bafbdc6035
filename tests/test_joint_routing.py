"""The joint router (kiwb.core.joint_routing): every teacher's representation side by side, one
logistic model of whose labels hold a text, against numbers worked out by hand."""

from __future__ import annotations

import pytest
import torch

from kiwb.core.joint_routing import JointFeatures, fit_joint, fit_softmax
from kiwb.core.routing import LabeledFeatures, TeacherFeatures, fit_routing


def test_each_teachers_columns_are_standardised_on_the_pool_and_set_side_by_side():
    first = torch.tensor([[1.0, 10.0], [3.0, 10.0]])   # column 2 constant: scale kept at 1e-6
    second = torch.tensor([[0.0], [4.0]])
    features = JointFeatures.fit([first, second])
    # means (2, 10) and (2); standard deviations (sample) sqrt(2) and 2 sqrt(2)
    found = features([torch.tensor([[2.0, 10.0]]), torch.tensor([[4.0]])])
    assert found.tolist()[0] == pytest.approx([0.0, 0.0, 2 / (2 * 2 ** 0.5)])


def test_softmax_regression_learns_a_separable_split_and_the_ridge_pulls_it_in():
    points = torch.tensor([[-2.0], [-1.0], [1.0], [2.0]])
    targets = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    weights, bias = fit_softmax(points, targets, torch.ones(4), ridge=0.1)
    probs = (points @ weights + bias).softmax(1)
    assert probs.argmax(1).tolist() == [0, 0, 1, 1]
    assert bias[0].item() == pytest.approx(bias[1].item(), abs=1e-3)  # symmetric data
    strong, _ = fit_softmax(points, targets, torch.ones(4), ridge=100.0)
    assert (strong[0, 1] - strong[0, 0]).abs() < (weights[0, 1] - weights[0, 0]).abs()


def test_labeled_texts_outweigh_the_pool_answers_they_contradict():
    # the pool's answers say teacher 0 for x < 0; two labeled texts at x = -1.5 belong to
    # teacher 1: at weight 10 they move the boundary past them
    pool = [torch.tensor([[-2.0], [-1.0], [1.0], [2.0]])]
    answers = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    labeled = [torch.tensor([[-1.5], [-1.5]])]
    owners = torch.tensor([[False, True], [False, True]])
    plain = fit_joint(pool, answers, ridge=0.1)
    taught = fit_joint(pool, answers, labeled=labeled, owners=owners, ridge=0.1, label_weight=10)
    at = [torch.tensor([[-1.5]])]
    assert plain.scores(at).argmax(1).item() == 0
    assert taught.scores(at).argmax(1).item() == 1


def _two_views(n: int = 60, seed: int = 0):
    """Teacher 0's texts sit near (3, 0) in its space, the others near (0, 3); the other way in
    teacher 1's. Teacher 0 is over-confident: it gives every text a sharp class."""
    generator = torch.Generator().manual_seed(seed)
    own = torch.randn(n, 2, generator=generator, dtype=torch.float64) * 0.4 + torch.tensor([3.0, 0.0])
    far = torch.randn(n, 2, generator=generator, dtype=torch.float64) * 0.4 + torch.tensor([0.0, 3.0])
    sharp = torch.tensor([[8.0, 0.0]] * n + [[0.0, 8.0]] * n, dtype=torch.float64)
    mild = torch.tensor([[0.6, 0.5]] * n + [[1.0, 0.0]] * n, dtype=torch.float64)
    features = []
    for logits, rep in ((sharp, torch.cat([own, far])), (mild, torch.cat([far, own]))):
        confidence = logits.softmax(1).max(1).values
        features.append(TeacherFeatures(confidence, confidence, torch.zeros(2 * n), logits,
                                        logits.softmax(1), rep))
    return features, torch.tensor([0] * n + [1] * n)


def test_joint_routing_reads_the_representations_where_confidence_fails():
    pool, owner = _two_views()
    assert (fit_routing("confidence", pool).scores(pool).argmax(1) == owner).double().mean() == 0.5
    fitted = fit_routing("joint", pool)
    assert fitted.probabilistic and fitted.joint is not None
    scores = fitted.scores(pool)
    assert scores.sum(1).tolist() == pytest.approx([1.0] * len(owner))  # a distribution
    assert (scores.argmax(1) == owner).double().mean() >= 0.95
    # the teachers' shares are what the model expects of the pool
    assert [router.share for router in fitted.routers] == pytest.approx([0.5, 0.5], abs=0.05)
    test, test_owner = _two_views(seed=1)  # other texts of the same teachers
    assert (fitted.scores(test).argmax(1) == test_owner).double().mean() >= 0.95


def test_joint_routing_takes_labeled_texts_where_the_project_has_them():
    pool, _ = _two_views()
    labeled, owner = _two_views(n=4, seed=2)
    classes = [torch.where(owner == 0, 0, -1), torch.where(owner == 1, 0, -1)]
    fitted = fit_routing("joint", pool, labeled=LabeledFeatures(labeled, classes))
    unlabeled = fit_routing("joint", pool)
    assert not torch.equal(fitted.joint.weights, unlabeled.joint.weights)


def test_joint_routing_needs_the_representations():
    pool, _ = _two_views()
    without = [TeacherFeatures(f.mc_confidence, f.det_confidence, f.mutual_information,
                               f.det_logits, f.mc_probs, None) for f in pool]
    with pytest.raises(ValueError, match="representation"):
        fit_routing("joint", without)
