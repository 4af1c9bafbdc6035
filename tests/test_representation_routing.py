"""Routing from teachers' representations (kiwb.core.representation_routing), against numbers
worked out by hand."""

from __future__ import annotations

import pytest
import torch

from kiwb.core.representation_routing import (
    Reference,
    RepresentationSettings,
    fit_class_gaussians,
    fit_representation_routers,
    nearest_similarity,
    seeded_reference,
)
from kiwb.core.routing import TeacherFeatures, fit_routing


def t(values) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float64)


def features(representation, logits, confidence=None) -> TeacherFeatures:
    logits = t(logits)
    confidence = t(confidence) if confidence is not None else logits.softmax(1).max(1).values
    return TeacherFeatures(confidence, confidence, torch.zeros(len(logits)), logits,
                           logits.softmax(1), t(representation))


def test_mahalanobis_distances_and_route_by_hand():
    # class 0 at (-1,-1), (1,1): mean (0,0); class 1 at (3,-1), (5,1): mean (4,0). Both centre to
    # (-1,-1), (1,1), so the pooled covariance is [[1,1],[1,1]] (singular); shrunk halfway to its
    # diagonal it is [[1, .5], [.5, 1]], whose inverse is [[4/3, -2/3], [-2/3, 4/3]].
    points = t([[-1, -1], [1, 1], [3, -1], [5, 1]])
    gaussians = fit_class_gaussians(points, torch.tensor([0, 0, 1, 1]), shrinkage=0.5)
    assert torch.allclose(gaussians.means, t([[0, 0], [4, 0]]))
    found = gaussians.squared_distances(t([[1, 0], [0, 1], [1, -1], [4, 0]]))
    expected = t([[4 / 3, 9 * 4 / 3],           # (1,0): to (0,0) 4/3; to (4,0) (-3,0) -> 12
                  [4 / 3, 16 * 4 / 3 + 2 * 4 * 2 / 3 + 4 / 3],  # (0,1) - (4,0) = (-4,1)
                  [4, 9 * 4 / 3 - 2 * (-3) * (-1) * 2 / 3 + 4 / 3],  # (1,-1); (-3,-1)
                  [16 * 4 / 3, 0]])
    assert torch.allclose(found, expected, atol=1e-4)
    # the nearest mean decides: minus the smallest distance
    assert found.min(1).values.tolist() == pytest.approx([4 / 3, 4 / 3, 4, 0], abs=1e-4)


def test_a_diagonal_covariance_is_left_as_it_is_by_shrinkage():
    # class 0 at (-1,0), (1,0), class 1 at (4,-1), (4,1): pooled covariance diag(.5, .5)
    points = t([[-1, 0], [1, 0], [4, -1], [4, 1]])
    gaussians = fit_class_gaussians(points, torch.tensor([0, 0, 1, 1]), shrinkage=0.3)
    # (1,1): to (0,0) (1+1)/.5 = 4; to (4,0) (9+1)/.5 = 20
    assert gaussians.squared_distances(t([[1, 1]])).tolist()[0] == pytest.approx([4, 20], abs=1e-4)


def test_knn_mean_similarity_by_hand_and_a_text_is_not_its_own_neighbour():
    neighbours = torch.nn.functional.normalize(t([[1, 0], [0, 1], [1, 1]]).float(), dim=1)
    # the query (1,0) is itself in the reference: its neighbours are (1,1) at cos 0.7071 and
    # (0,1) at 0; k = 2 -> 0.3536. The query (2,1): cos to (1,0) .8944, to (1,1) .9487 -> .9216
    found = nearest_similarity(t([[1, 0], [2, 1]]), neighbours, k=2)
    assert found.tolist() == pytest.approx([(0.70711 + 0) / 2, (0.89443 + 0.94868) / 2], abs=1e-4)


def test_seeds_are_the_surest_share_of_each_predicted_class():
    # six texts, predicted 0,0,0,1,1,1 with logit margins 9 5 7 | 6 8 4: 1/3 of each class
    # keeps one text: row 0 for class 0 and row 4 for class 1
    logits = [[9, 0], [5, 0], [7, 0], [0, 6], [0, 8], [0, 4]]
    teacher = features([[i, 0] for i in range(6)], logits)
    reference = seeded_reference(teacher, share=1 / 3)
    assert reference.representation[:, 0].tolist() == [0, 4]
    assert reference.classes.tolist() == [0, 1]


def _two_teachers(over_confident: float = 1.0):
    """Texts of teacher 0's topic sit near (3, 0) in its space and near (0, 3) (another
    direction) in teacher 1's, and the other way round; teacher 0's logits are multiplied by
    `over_confident`."""
    generator = torch.Generator().manual_seed(0)
    n = 40
    own = torch.randn(n, 2, generator=generator, dtype=torch.float64) * 0.3 + t([3, 0])
    far = torch.randn(n, 2, generator=generator, dtype=torch.float64) * 0.3 + t([0, 3])
    # teacher 0 knows the first n texts; its representation of the others is far away
    rep0, rep1 = torch.cat([own, far]), torch.cat([far.flip(0), own.flip(0)])
    logits0 = torch.cat([torch.tensor([[2.0, 0.0]]).repeat(n, 1),
                         torch.tensor([[1.0, 0.5]]).repeat(n, 1)]).double() * over_confident
    logits1 = torch.cat([torch.tensor([[0.6, 0.5]]).repeat(n, 1),
                         torch.tensor([[1.0, 0.0]]).repeat(n, 1)]).double()
    return [features(rep0, logits0), features(rep1, logits1)], torch.tensor([0] * n + [1] * n)


@pytest.mark.parametrize("name", ["mahalanobis", "knn"])
def test_representation_routing_holds_where_an_over_confident_teacher_takes_confidence(name):
    pool, owner = _two_teachers(over_confident=3.0)
    confidence = fit_routing("confidence", pool).scores(pool).argmax(1)
    assert (confidence == owner).double().mean() == pytest.approx(0.5)  # teacher 0 wins all
    routed = fit_routing(name, pool).scores(pool).argmax(1)
    assert (routed == owner).double().mean() >= 0.95


@pytest.mark.parametrize("name", ["mahalanobis", "knn"])
def test_seeding_on_every_text_a_teacher_claims_falls_to_chance(name):
    # why kiwb seeds on the surest texts only: the over-confident teacher 0 gives all 80 texts
    # class 0, so that class's mean (or its neighbours) sits between its texts and the others
    pool, owner = _two_teachers(over_confident=3.0)
    every = RepresentationSettings(seed_share=1.0, knn_seed_share=1.0)
    routed = fit_routing(name, pool, representation=every).scores(pool).argmax(1)
    assert (routed == owner).double().mean() <= 0.6


def test_seen_references_keep_their_own_shrinkage():
    pool, _ = _two_teachers()
    seen = [Reference(t([[3, 0], [3.1, 0.2], [2.8, 0.1], [3.2, 0.3]]), torch.tensor([0, 0, 1, 1]),
                      "seen"), None]
    # the seen teacher's Gaussians follow seen_shrinkage alone, the seeded one's shrinkage alone
    first = fit_representation_routers("mahalanobis", pool, seen,
                                       RepresentationSettings(shrinkage=0.9, seen_shrinkage=0.2))
    second = fit_representation_routers("mahalanobis", pool, seen,
                                        RepresentationSettings(shrinkage=0.1, seen_shrinkage=0.2))
    third = fit_representation_routers("mahalanobis", pool, seen,
                                       RepresentationSettings(shrinkage=0.9, seen_shrinkage=0.7))
    assert torch.equal(first[0].scores(pool[0]), second[0].scores(pool[0]))
    assert not torch.equal(first[0].scores(pool[0]), third[0].scores(pool[0]))
    assert not torch.equal(first[1].scores(pool[1]), second[1].scores(pool[1]))


def test_seen_texts_replace_the_seeds_and_refits_start_from_them():
    pool, owner = _two_teachers()
    seen = [Reference(t([[3, 0], [3.1, 0.2], [2.8, 0.1]]), torch.tensor([0, 0, 0]), "seen"), None]
    routers = fit_representation_routers("mahalanobis", pool, seen,
                                         RepresentationSettings(refits=0))
    assert [r.source for r in routers] == ["seen", "seeded"]
    assert routers[0].texts == 3
    # a teacher's own training texts stay its reference; the seeded one is refitted on the
    # pool texts routed to it
    refitted = fit_representation_routers("mahalanobis", pool, seen, RepresentationSettings(refits=1))
    assert [r.source for r in refitted] == ["seen", "seeded, refitted"]
    assert [r.texts for r in refitted] == [3, 40]
    every = fit_representation_routers("mahalanobis", pool, [seen[0], seen[0]],
                                       RepresentationSettings(refits=2))
    assert [r.source for r in every] == ["seen", "seen"]
    scores = torch.stack([r.scores(f) for r, f in zip(refitted, pool, strict=True)], dim=1)
    assert (scores.argmax(1) == owner).all()


def test_energy_is_the_quantile_of_logsumexp_over_the_pool():
    # logsumexp of [0,0], [1,1], [2,2] is log 2, 1 + log 2, 2 + log 2: quantiles 1/6, 1/2, 5/6
    teacher = features([[0, 0]] * 3, [[0, 0], [1, 1], [2, 2]])
    routing = fit_routing("energy", [teacher, teacher])
    assert routing.scores([teacher, teacher])[:, 0].tolist() == pytest.approx([1 / 6, 1 / 2, 5 / 6])


def test_a_routing_that_reads_representations_refuses_scores_without_them():
    teacher = TeacherFeatures(t([.9]), t([.9]), t([0.0]), t([[1, 0]]), t([[.7, .3]]))
    with pytest.raises(ValueError, match="representation"):
        fit_routing("mahalanobis", [teacher, teacher])


@pytest.mark.parametrize("kind", ["token", "multi-label", "multi-task", "embedding"])
def test_kinds_without_representations_refuse_their_routings_in_one_line(kind):
    from kiwb.kinds import KINDS

    KINDS["sequence"].check_routing("mahalanobis")  # the sequence kind keeps representations
    KINDS[kind].check_routing("rank")
    for routing in ("mahalanobis", "knn", "energy"):
        with pytest.raises(ValueError, match=rf"routing '{routing}' reads each teacher's "
                                             "representation or logits per text") as refused:
            KINDS[kind].check_routing(routing)
        assert "\n" not in str(refused.value) and KINDS[kind].jobs.default_routing in str(refused.value)
