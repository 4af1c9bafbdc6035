"""Stacked routing: a ridge toward rank routing that labels can move, checked on texts built
so that the answer is known."""

from __future__ import annotations

import pytest
import torch

from kiwb.core.routing import LabeledFeatures, TeacherFeatures, fit_routing


def teacher(confidence, logits) -> TeacherFeatures:
    confidence = torch.as_tensor(confidence, dtype=torch.float64)
    logits = torch.as_tensor(logits, dtype=torch.float64)
    return TeacherFeatures(mc_confidence=confidence, det_confidence=confidence,
                           mutual_information=torch.zeros_like(confidence), det_logits=logits,
                           mc_probs=logits.softmax(1))


def pool_with_a_misreading_teacher(n: int, seed: int = 0):
    """2n texts: the first n in A's labels (class 0 or 1), the last n in B's. A is equally sure
    of both halves, so rank routing cannot tell them apart; but A reads B's texts as its class
    1 and its own as class 0: a pattern only labels can teach."""
    generator = torch.Generator().manual_seed(seed)
    noise = lambda: torch.rand(2 * n, generator=generator, dtype=torch.float64)  # noqa: E731
    a_confidence = 0.7 + 0.2 * noise()
    b_confidence = 0.6 + 0.2 * noise()  # B is less sure everywhere: rank sends most texts to A
    a_class_one = torch.cat([torch.zeros(n), torch.ones(n)]).double()
    a_logits = torch.stack([2 * (1 - a_class_one) - 1, 2 * a_class_one - 1], 1) * 2
    b_logits = torch.stack([noise(), noise()], 1)
    a = teacher(a_confidence, a_logits)
    b = teacher(b_confidence, b_logits)
    owners = torch.cat([torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long)])
    return [a, b], owners


def labeled(pool, owners, rows) -> LabeledFeatures:
    """Classes within each teacher's labels: 0 inside, -1 outside."""
    rows = torch.tensor(rows)
    features = [TeacherFeatures(f.mc_confidence[rows], f.det_confidence[rows],
                                f.mutual_information[rows], f.det_logits[rows], f.mc_probs[rows])
                for f in pool]
    return LabeledFeatures(features, [torch.where(owners[rows] == i, 0, -1) for i in range(2)])


def routed_right(fitted, pool, owners) -> float:
    return float((fitted.scores(pool).argmax(1) == owners).double().mean())


def test_labels_teach_what_rank_routing_cannot_see():
    pool, owners = pool_with_a_misreading_teacher(100)
    rank = fit_routing("rank", pool)
    # rank scores are pool quantiles of each teacher's own confidence: a coin toss here
    assert 0.3 < routed_right(rank, pool, owners) < 0.7
    # The ridge lets labels overturn rank routing by as much as they agree: 40 labels move
    # it to 79% right, 100 labels to 93.5% (measured; the pool is seeded).
    right = [routed_right(fit_routing("stacked", pool, labeled=labeled(
        pool, owners, list(range(0, 200, step)))), pool, owners) for step in (5, 2)]
    assert 0.75 < right[0] < right[1] and right[1] > 0.9
    stacked = fit_routing("stacked", pool, labeled=labeled(pool, owners, list(range(0, 200, 2))))
    shares = [router.share for router in stacked.routers]
    assert sum(shares) == pytest.approx(1.0) and all(0.4 < share < 0.6 for share in shares)


def test_with_a_huge_ridge_stacked_routing_decides_as_rank_routing_does():
    import kiwb.core.stacked_routing as stacked_routing

    pool, owners = pool_with_a_misreading_teacher(50, seed=1)
    rows = [0, 1, 60, 61]
    base = fit_routing("rank", pool).scores(pool).argmax(1)
    ridge, stacked_routing.STACK_L2 = stacked_routing.STACK_L2, 1e9
    try:
        stacked = fit_routing("stacked", pool, labeled=labeled(pool, owners, rows))
    finally:
        stacked_routing.STACK_L2 = ridge
    assert torch.equal(stacked.scores(pool).argmax(1), base)


def test_a_label_two_teachers_share_counts_for_both():
    pool, owners = pool_with_a_misreading_teacher(20, seed=2)
    both = labeled(pool, owners, [0, 25])
    shared = LabeledFeatures(both.features, [torch.tensor([0, 0]), torch.tensor([0, 0])])
    fitted = fit_routing("stacked", pool, labeled=shared)  # every owner: nothing to prefer
    scores = fitted.scores(pool)
    assert torch.isfinite(scores).all() and torch.allclose(scores.sum(1), torch.ones(40, dtype=scores.dtype))


def test_stacked_routing_without_labels_is_refused():
    pool, _owners = pool_with_a_misreading_teacher(10)
    with pytest.raises(ValueError, match="needs labeled texts"):
        fit_routing("stacked", pool)
