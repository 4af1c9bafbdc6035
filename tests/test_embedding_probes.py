"""The probes against numbers worked out by hand: leave-one-out kNN and retrieval."""

import pytest
import torch

from kiwb.kinds.embedding.probes import knn_accuracy, retrieval


def test_knn_by_hand():
    # Four texts on a line of angles: 0 and 1 point right (label 0), 2 and 3 up (label 1).
    # With k = 1 each text's nearest other is its pair: all right.
    points = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    labels = torch.tensor([0, 0, 1, 1])
    assert knn_accuracy(points, labels, neighbours=1) == 1.0
    # Relabel text 1 as 1: text 0's neighbour now votes 1 (wrong), text 1's votes 0 (wrong),
    # texts 2 and 3 still vote for each other (right): 2 of 4.
    assert knn_accuracy(points, torch.tensor([0, 1, 1, 1]), neighbours=1) == 0.5


def test_knn_ties_go_to_the_closer_voters():
    # Text 0's two neighbours: text 1 (label 0, close) and text 2 (label 1, far): one vote
    # each, and the closer one wins. Text 1's: 0 (label 0, close) and 2: right. Text 2's:
    # 1 and 0, both label 0: wrong. 2 of 3.
    points = torch.tensor([[1.0, 0.0], [1.0, 0.2], [0.0, 1.0]])
    assert knn_accuracy(points, torch.tensor([0, 0, 1]), neighbours=2) == pytest.approx(2 / 3)


def test_knn_needs_two_texts():
    with pytest.raises(ValueError, match="two or more"):
        knn_accuracy(torch.ones(1, 2), torch.tensor([0]))


def test_retrieval_by_hand():
    # Query 0 finds partner 0 first; query 1's partner comes second (partner 0 is closer);
    # query 2's partner is third. Ranks 1, 2, 3: recall@1 1/3, recall@2 2/3, MRR (1 + 1/2 + 1/3) / 3.
    queries = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    partners = torch.tensor([[1.0, 0.0], [1.0, 0.5], [1.0, 1.0]])
    # Query 1 and 2 are identical to query 0: every query sees the order 0, 1, 2.
    figures = retrieval(queries, partners, ranks=(1, 2))
    assert figures["recall@1"] == pytest.approx(1 / 3)
    assert figures["recall@2"] == pytest.approx(2 / 3)
    assert figures["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_concatenation_averages_the_teachers_cosines():
    from kiwb.kinds.embedding.probes import concatenated

    # Teacher A says 0 and 1 are identical (cos 1), B says orthogonal (cos 0): the joint
    # space's cosine is (1 + 0) / 2.
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    joint = torch.nn.functional.normalize(concatenated([a, b]), dim=-1)
    assert (joint[0] @ joint[1]).item() == pytest.approx(0.5)


def test_averaging_keeps_equal_widths_and_maps_unequal_ones_isometrically():
    from kiwb.kinds.embedding.probes import averaged

    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert averaged([a, a]).tolist() == a.tolist()
    # A (3-d) says texts 0 and 1 are identical, B (300-d) that they are orthogonal: after
    # independent random isometries the average's cosine is near the mean, 0.5 (the cross
    # terms are of order 1/sqrt(300)).
    wide = torch.eye(300)[:2]
    narrow = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    mixed = torch.nn.functional.normalize(averaged([narrow, wide], seed=3), dim=-1)
    assert mixed.shape == (2, 300)
    assert (mixed[0] @ mixed[1]).item() == pytest.approx(0.5, abs=0.15)


def test_probes_in_row_blocks_equal_the_whole_matrix(monkeypatch):
    from kiwb.kinds.embedding import probes

    generator = torch.Generator().manual_seed(0)
    points = torch.randn(50, 8, generator=generator)
    partners = points + 0.8 * torch.randn(50, 8, generator=generator)
    labels = torch.randint(0, 4, (50,), generator=generator)
    whole = (probes.knn_accuracy(points, labels, neighbours=5), probes.retrieval(points, partners))
    monkeypatch.setattr(probes, "ROWS_AT_A_TIME", 7)  # blocks of 7 rows, the last one short
    assert (probes.knn_accuracy(points, labels, neighbours=5),
            probes.retrieval(points, partners)) == whole


def test_a_runs_best_line_names_each_probe_as_the_step_lines_do():
    from kiwb.kinds import kind_named
    from kiwb.kinds.embedding.student import probe_report

    kind = kind_named("embedding")
    labels_only = probe_report({"knn_accuracy": 0.522}, 500)
    assert kind.words.best_text(labels_only) == "kNN accuracy 52.2%"
    assert kind.words.evaluation_text(labels_only) == "eval kNN accuracy 52.2%"
    both = probe_report({"knn_accuracy": 0.5, "recall@1": 0.25, "mrr": 0.375}, 500)
    assert kind.words.best_text(both) == "kNN accuracy 50.0%, recall@1 25.0%, MRR 37.5%"
    # a best recorded without its probes (an older run) keeps the headline's name
    older = {"accuracy": 0.5, "macro_f1": 0.375}
    assert kind.words.best_text(older) == "probe score 50.00%, retrieval MRR 37.50%"
    assert kind_named(None).words.best_text({"accuracy": 0.5, "macro_f1": 0.25}) == \
        "accuracy 50.00%, macro-F1 25.00%"
