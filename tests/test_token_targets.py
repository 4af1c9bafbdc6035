"""Word targets of token integration against numbers worked out by hand (kiwb.kinds.token):
spans read per teacher, placed into the union by position, clusters decided by routing, the
baselines per word, the BIO repair; and valid BIO for every method on random teachers."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from kiwb.kinds.token.integration import (
    WordScores,
    cluster_features,
    decode_all,
    integrate_words,
)
from kiwb.kinds.token.student import per_teacher_entity_fit
from kiwb.kinds.token.tags import Span, is_valid_bio, read_tag_set
from kiwb.kinds.token.targets import placed_in_union, repair_bio, teacher_spans, union_coverage

UNION = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
LOC = read_tag_set(["O", "B-LOC", "I-LOC"])
PER = read_tag_set(["O", "B-PER", "I-PER"])
# One sentence of four words. A (LOC) reads LOC LOC O O; B (PER) reads PER O O PER.
A_PROBS = torch.tensor([[0.1, 0.8, 0.1], [0.2, 0.1, 0.7], [0.9, 0.05, 0.05], [0.6, 0.3, 0.1]])
B_PROBS = torch.tensor([[0.3, 0.6, 0.1], [0.8, 0.1, 0.1], [0.9, 0.05, 0.05], [0.2, 0.7, 0.1]])


def close(actual, expected) -> None:
    assert_close(actual.double(), torch.tensor(expected, dtype=torch.float64), rtol=0,
                 atol=1e-5)


def scores(*teachers) -> WordScores:
    """Word scores of one sentence; confidences are not read by integrate_words."""
    probs = [p for p, _ in teachers]
    words = probs[0].shape[0]
    return WordScores(
        tag_sets=[t for _, t in teachers], union=UNION, offsets=torch.tensor([0, words]),
        det_probs=probs, det_logits=[p.log() for p in probs], mc_probs=probs,
        mc_confidence=torch.rand(words, len(probs)), det_confidence=torch.rand(words, len(probs)),
        mutual_information=torch.zeros(words, len(probs)))


def tags_of(targets) -> list[str]:
    return [UNION[i] for i in targets.argmax(1).tolist()]


def test_each_teacher_reads_its_spans_from_type_mass_and_boundaries():
    assert teacher_spans(A_PROBS, LOC) == [Span(0, 2, "LOC")]
    assert teacher_spans(B_PROBS, PER) == [Span(0, 1, "PER"), Span(3, 4, "PER")]
    # A word's type is its type's B and I together: .45 + .1 of LOC beats O's .45, and its
    # boundary is the top LOC tag: B, so a span begins.
    assert teacher_spans(torch.tensor([[0.45, 0.45, 0.1]]), LOC) == [Span(0, 1, "LOC")]


def test_placing_by_position_by_hand():
    # A: w0 starts its LOC span (LOC's .9 to B-LOC); w1 continues it (.8 to I-LOC); w2 and w3
    # continue no LOC span, so their LOC mass goes to B-LOC.
    close(placed_in_union(A_PROBS, LOC, [Span(0, 2, "LOC")], UNION),
          [[0.1, 0.9, 0, 0, 0], [0.2, 0, 0.8, 0, 0], [0.9, 0.1, 0, 0, 0], [0.6, 0.4, 0, 0, 0]])
    # B: its span (0, 1) ends at w0, so w1's PER mass is a new B-PER, as is w3's.
    close(placed_in_union(B_PROBS, PER, [Span(0, 1, "PER"), Span(3, 4, "PER")], UNION),
          [[0.3, 0, 0, 0.7, 0], [0.8, 0, 0, 0.2, 0], [0.9, 0, 0, 0.1, 0], [0.2, 0, 0, 0.8, 0]])


def test_clusters_are_decided_as_wholes_by_hand():
    sentence = scores((A_PROBS, LOC), (B_PROBS, PER))
    decoded = decode_all(sentence)
    assert [(c.start, c.end, c.kind) for c in decoded.clusters] == [
        (0, 2, "type-clash"), (3, 4, "entity-vs-none")]
    routing = torch.tensor([[0.9, 0.4], [0.3, 0.8]])  # A wins the clash, B its own PER
    hard = integrate_words("muki-hard", sentence, decoded, routing)
    close(hard.targets, [[0.1, 0.9, 0, 0, 0], [0.2, 0, 0.8, 0, 0], [1, 0, 0, 0, 0],
                         [0.2, 0, 0, 0.8, 0]])  # w2 is in no cluster: O at full weight
    close(hard.weights, [0.5, 0.5, 1.0, 0.5])  # the clusters' margins 0.9 - 0.4, 0.8 - 0.3
    assert hard.routed.tolist() == [0, 1]
    assert tags_of(hard.targets) == ["B-LOC", "I-LOC", "O", "B-PER"]
    # Soft mixes the two teachers' placed rows by the estimates normalised: .9/1.3, .4/1.3.
    soft = integrate_words("muki-soft", sentence, decoded, routing)
    close(soft.targets[:2], [[0.161538, 0.623077, 0, 0.215385, 0],
                             [0.384615, 0, 0.553846, 0.061538, 0]])
    assert tags_of(soft.targets) == ["B-LOC", "I-LOC", "O", "B-PER"]
    unweighted = integrate_words("muki-hard", sentence, decoded, routing, reweight=False)
    close(unweighted.weights, [1.0, 1.0, 1.0, 1.0])


def test_vanilla_kd_gives_o_only_where_every_teacher_says_o():
    sentence = scores((A_PROBS, LOC), (B_PROBS, PER))
    vanilla = integrate_words("vanilla-kd", sentence, decode_all(sentence), torch.zeros(2, 2))
    # w0: entity mass B-LOC .9 and B-PER .7, O = .1 x .3 = .03; total 1.63.
    # w2: B-LOC .1, B-PER .1, O = .9 x .9 = .81; total 1.01.
    close(vanilla.targets[0], [0.03 / 1.63, 0.9 / 1.63, 0, 0.7 / 1.63, 0])
    close(vanilla.targets[2], [0.81 / 1.01, 0.1 / 1.01, 0, 0.1 / 1.01, 0])
    close(vanilla.weights, [1.0] * 4)


def test_uhc_keeps_each_teacher_on_its_own_tags():
    sentence = scores((A_PROBS, LOC), (B_PROBS, PER))
    uhc = integrate_words("uhc", sentence, decode_all(sentence), torch.zeros(2, 2))
    assert uhc.targets.shape == (4, 2, 5)
    close(uhc.targets[1, 0], [0.2, 0, 0.8, 0, 0])
    coverage = union_coverage([LOC, PER], UNION)
    assert coverage.tolist() == [[True, True, True, False, False], [True, False, False, True, True]]


def test_repair_swaps_an_i_tag_that_follows_another_type():
    targets = torch.tensor([[0.1, 0.3, 0, 0.6, 0], [0.2, 0, 0.7, 0.1, 0], [0.1, 0, 0.8, 0.1, 0]])
    repaired = repair_bio(targets, UNION)
    # w1's I-LOC follows B-PER: its mass goes to B-LOC; w2's I-LOC then follows B-LOC, kept.
    close(repaired, [[0.1, 0.3, 0, 0.6, 0], [0.2, 0.7, 0, 0.1, 0], [0.1, 0, 0.8, 0.1, 0]])
    assert tags_of(repaired) == ["B-PER", "B-LOC", "I-LOC"]


def test_cluster_features_average_the_words_of_each_cluster():
    sentence = scores((A_PROBS, LOC), (B_PROBS, PER))
    sentence = WordScores(**{**sentence.__dict__,
                             "mc_confidence": torch.tensor([[0.8, 0.2], [0.6, 0.4],
                                                            [0.1, 0.1], [0.3, 0.9]])})
    features = cluster_features(sentence, decode_all(sentence))
    close(features[0].mc_confidence, [0.7, 0.3])   # A over w0, w1; then over w3
    close(features[1].mc_confidence, [0.3, 0.9])
    # in place of class logits: the log of A's mean entity-tag distribution over w0, w1:
    # (.8/.9, .1/.9) and (.1/.8, .7/.8) averaged
    close(features[0].det_logits[0].exp(), [(0.8 / 0.9 + 0.1 / 0.8) / 2,
                                            (0.1 / 0.9 + 0.7 / 0.8) / 2])


@pytest.mark.parametrize("method", ["muki-hard", "muki-soft", "vanilla-kd", "uhc"])
def test_every_method_gives_valid_bio_on_random_teachers(method):
    generator = torch.Generator().manual_seed(7)
    third = read_tag_set(["O", "B-ORG", "I-ORG", "B-LOC", "I-LOC"])  # shares LOC with A
    union = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER", "B-ORG", "I-ORG"]
    for _ in range(40):
        words = int(torch.randint(1, 12, (1,), generator=generator))
        probs = [torch.softmax(3 * torch.randn(words, size, generator=generator), 1)
                 for size in (3, 3, 5)]
        sentence = WordScores(
            tag_sets=[LOC, PER, third], union=union, offsets=torch.tensor([0, words]),
            det_probs=probs, det_logits=[p.log() for p in probs], mc_probs=probs,
            mc_confidence=torch.rand(words, 3, generator=generator),
            det_confidence=torch.rand(words, 3, generator=generator),
            mutual_information=torch.zeros(words, 3))
        decoded = decode_all(sentence)
        routing = torch.rand(len(decoded.clusters), 3, generator=generator)
        result = integrate_words(method, sentence, decoded, routing)
        targets = result.targets if result.targets.dim() == 2 else repair_bio(
            result.targets.mean(1), union)
        assert is_valid_bio([union[i] for i in targets.argmax(1).tolist()])
        assert_close(targets.sum(1), torch.ones(words), rtol=0, atol=1e-5)


def test_a_uhc_taggers_fit_reads_each_teachers_tags_by_hand():
    # One sentence, "Paris Jean Luc". Teacher 0 knows LOC (Paris), teacher 1 PER (Jean Luc).
    union = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    coverage = torch.tensor([[True, True, True, False, False], [True, False, False, True, True]])
    one_hot = torch.eye(5)
    targets = torch.stack([torch.stack([one_hot[1], one_hot[0]]),   # Paris: B-LOC · O
                           torch.stack([one_hot[0], one_hot[3]]),   # Jean: O · B-PER
                           torch.stack([one_hot[0], one_hot[4]])])  # Luc: O · I-PER
    # Among teacher 0's tags the student says B-LOC O O: LOC found, F1 1. Among teacher 1's it
    # says O B-PER B-PER: two one-word PER where the target has one two-word PER, F1 0.
    logits = torch.tensor([[2.0, 5.0, 0.0, 1.0, 0.0],
                           [3.0, 0.0, 0.0, 4.0, 0.0],
                           [3.0, 0.0, 0.0, 4.0, 2.0]])
    assert per_teacher_entity_fit(logits, targets, coverage, union, [3], ["LOC", "PER"]) == 0.5
    right = logits.clone()
    right[2, 4] = 5.0  # Luc: I-PER among teacher 1's tags
    assert per_teacher_entity_fit(right, targets, coverage, union, [3], ["LOC", "PER"]) == 1.0
