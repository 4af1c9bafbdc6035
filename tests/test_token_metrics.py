"""NER entity metrics against figures worked out by hand, and against seqeval when installed."""

from __future__ import annotations

import random
import warnings

import pytest

from kiwb.kinds.token.metrics import entity_report, entity_spans, precision_recall_f1

# tags -> (conlleval spans, strict IOB2 spans); a span is (start, end exclusive, type)
SPAN_CASES = {
    "two entities": (
        ["B-PER", "I-PER", "O", "B-LOC"],
        [(0, 2, "PER"), (3, 4, "LOC")], [(0, 2, "PER"), (3, 4, "LOC")],
    ),
    # An I after O opens an entity for conlleval; strict IOB2 wants a B first.
    "I without B": (
        ["O", "I-PER", "I-PER", "O"],
        [(1, 3, "PER")], [],
    ),
    "I at the sentence start": (
        ["I-LOC", "O"],
        [(0, 1, "LOC")], [],
    ),
    # The type change ends PER; conlleval opens LOC there, strict drops the stray I-LOC words.
    "type change mid-span": (
        ["B-PER", "I-PER", "I-LOC", "I-LOC"],
        [(0, 2, "PER"), (2, 4, "LOC")], [(0, 2, "PER")],
    ),
    "B then I of another type": (
        ["B-PER", "I-LOC"],
        [(0, 1, "PER"), (1, 2, "LOC")], [(0, 1, "PER")],
    ),
    # After the dropped I-LOC run, a B-LOC still opens a strict entity.
    "a stray run then a B": (
        ["B-PER", "I-LOC", "I-LOC", "B-LOC"],
        [(0, 1, "PER"), (1, 3, "LOC"), (3, 4, "LOC")], [(0, 1, "PER"), (3, 4, "LOC")],
    ),
    "adjacent entities": (
        ["B-PER", "B-PER", "I-PER", "B-LOC"],
        [(0, 1, "PER"), (1, 3, "PER"), (3, 4, "LOC")],
        [(0, 1, "PER"), (1, 3, "PER"), (3, 4, "LOC")],
    ),
    "entity at the end": (
        ["O", "B-ORG", "I-ORG"],
        [(1, 3, "ORG")], [(1, 3, "ORG")],
    ),
    "hyphen in the type": (
        ["B-WORK-OF-ART", "I-WORK-OF-ART"],
        [(0, 2, "WORK-OF-ART")], [(0, 2, "WORK-OF-ART")],
    ),
    "only O": (["O", "O"], [], []),
    "empty sentence": ([], [], []),
}


@pytest.mark.parametrize(("tags", "conlleval", "strict"), list(SPAN_CASES.values()),
                         ids=list(SPAN_CASES))
def test_entity_spans_match_hand_read_spans(tags, conlleval, strict):
    assert entity_spans(tags, strict=False) == conlleval
    assert entity_spans(tags, strict=True) == strict


@pytest.mark.parametrize("tag", ["E-PER", "B-", "PER", "", "o", "S-LOC"])
def test_entity_spans_reject_tags_that_are_not_bio2(tag):
    with pytest.raises(ValueError, match="not a BIO2 tag"):
        entity_spans(["O", tag], strict=False)


def test_precision_recall_f1_from_counts():
    # 2 right of 7 predicted and 6 gold: P 2/7, R 2/6, F1 2·2/(7+6) = 4/13
    assert precision_recall_f1(2, 7, 6) == pytest.approx(
        {"precision": 2 / 7, "recall": 1 / 3, "f1": 4 / 13})
    assert precision_recall_f1(0, 0, 0) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


# Five sentences mixing a right entity, a wrong type, a boundary error, a stray I, a miss and
# a type change mid-span.
MESSY_GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC", "O"],  # PER(0,2) LOC(3,4)
    ["B-ORG", "I-ORG", "I-ORG", "O"],  # ORG(0,3)
    ["O", "O", "B-PER", "O"],  # PER(2,3)
    ["B-LOC", "O", "O"],  # LOC(0,1)
    ["B-PER", "I-PER", "I-PER"],  # PER(0,3)
]
MESSY_PREDICTED = [
    ["B-PER", "I-PER", "O", "B-ORG", "O"],  # PER(0,2) right; ORG(3,4) on gold LOC's span
    ["B-ORG", "I-ORG", "O", "O"],  # ORG(0,2): gold ORG(0,3) has a boundary error
    ["I-LOC", "O", "I-PER", "O"],  # conlleval LOC(0,1) over no gold, PER(2,3) right; strict: none
    ["O", "O", "O"],  # gold LOC(0,1) missed
    ["B-PER", "I-PER", "I-LOC"],  # conlleval PER(0,2) LOC(2,3); strict PER(0,2): boundary error
]


def test_messy_report_matches_hand_computed_figures():
    report = entity_report(MESSY_GOLD, MESSY_PREDICTED)
    # conlleval: gold 2+1+1+1+1 = 6, predicted 2+1+2+0+2 = 7, right: PER in sentences 0 and 2
    # P 2/7, R 2/6, F1 2·2/(7+6) = 4/13
    assert report["precision"] == pytest.approx(2 / 7)
    assert report["recall"] == pytest.approx(1 / 3)
    assert report["f1"] == pytest.approx(4 / 13)
    # strict: gold the same 6, predicted 2+1+0+0+1 = 4, right: only PER in sentence 0
    # P 1/4, R 1/6, F1 2·1/(4+6) = 1/5
    assert report["strict"] == pytest.approx({"precision": 1 / 4, "recall": 1 / 6, "f1": 1 / 5})
    # PER: 2 right of 3 predicted, 3 gold; LOC: 0 of 2 predicted, 2 gold; ORG: 0 of 2, 1 gold
    assert list(report["per_type"]) == ["LOC", "ORG", "PER"]
    assert report["per_type"]["PER"] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3})
    assert report["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2}
    assert report["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    # (0 + 0 + 2/3) / 3
    assert report["macro_f1"] == pytest.approx(2 / 9)
    # tags equal per sentence: 4 of 5, 3 of 4, 2 of 4, 2 of 3, 2 of 3 -> 13 of 19
    assert report["word_accuracy"] == pytest.approx(13 / 19)
    # PER->PER twice (sentences 0, 2), LOC->ORG (0), O->LOC (2), LOC->O (3);
    # ORG (1) and PER (4) only overlap predictions with other boundaries
    assert report["confusion"] == {
        "labels": ["LOC", "ORG", "PER", "O"],
        "matrix": [[0, 1, 0, 1],
                   [0, 0, 0, 0],
                   [0, 0, 2, 0],
                   [1, 0, 0, 0]],
    }
    assert report["boundary_errors"] == {"LOC": 0, "ORG": 1, "PER": 1}
    assert (report["num_sentences"], report["num_words"]) == (5, 19)
    assert (report["num_gold_entities"], report["num_predicted_entities"]) == (6, 7)


# gold, predicted -> (conlleval P, R, F1), word accuracy, confusion matrix, boundary errors;
# types are the sorted ones seen, so the labels are LOC, PER, O where both occur.
REPORT_CASES = {
    # 2 of 2 right; words 5 of 5
    "perfect": (
        [["B-PER", "I-PER", "O", "B-LOC"], ["O"]], [["B-PER", "I-PER", "O", "B-LOC"], ["O"]],
        (1.0, 1.0, 1.0), 1.0, [[1, 0, 0], [0, 1, 0], [0, 0, 0]], {"LOC": 0, "PER": 0},
    ),
    # nothing predicted: P 0/0 -> 0, R 0/2; only word 1 (O) right of 4; both gold go to O
    "no predictions": (
        [["B-PER", "O", "B-LOC", "I-LOC"]], [["O", "O", "O", "O"]],
        (0.0, 0.0, 0.0), 1 / 4, [[0, 0, 1], [0, 0, 1], [0, 0, 0]], {"LOC": 0, "PER": 0},
    ),
    # no gold entity: P 0/1, R 0/0 -> 0; only word 0 right: 1/2; the prediction comes from O
    "no gold entities": (
        [["O", "O"]], [["O", "I-PER"]],
        (0.0, 0.0, 0.0), 1 / 2, [[0, 0], [1, 0]], {"PER": 0},
    ),
    # empty sentences add no words and no entities: 1 of 1 right, 1 word of 1
    "empty sentences": (
        [[], ["B-MISC"], []], [[], ["B-MISC"], []],
        (1.0, 1.0, 1.0), 1.0, [[1, 0], [0, 0]], {"MISC": 0},
    ),
    # one predicted PER(0,2) over two adjacent gold PER(0,1) PER(1,2): both boundary errors;
    # P 0/1, R 0/2; only word 0 right: 1/2
    "one prediction over two adjacent entities": (
        [["B-PER", "B-PER"]], [["B-PER", "I-PER"]],
        (0.0, 0.0, 0.0), 1 / 2, [[0, 0], [0, 0]], {"PER": 1 + 1},
    ),
    # gold LOC(0,2) split into LOC(0,1) LOC(1,2): one boundary error, the predictions overlap
    # gold so neither comes from O; P 0/2, R 0/1; only word 0 right: 1/2
    "one entity predicted as two": (
        [["B-LOC", "I-LOC"]], [["B-LOC", "B-LOC"]],
        (0.0, 0.0, 0.0), 1 / 2, [[0, 0], [0, 0]], {"LOC": 1},
    ),
    # same span, other type: LOC->PER in the matrix; P 0/1, R 0/1; words 0 of 2 (B-, I- differ)
    "wrong type": (
        [["B-LOC", "I-LOC"]], [["B-PER", "I-PER"]],
        (0.0, 0.0, 0.0), 0.0, [[0, 1, 0], [0, 0, 0], [0, 0, 0]], {"LOC": 0, "PER": 0},
    ),
    # nothing at all: every ratio is 0/0 -> 0.0, the matrix has only O
    "no words": (
        [[]], [[]],
        (0.0, 0.0, 0.0), 0.0, [[0]], {},
    ),
}


@pytest.mark.parametrize(("gold", "predicted", "scores", "word_accuracy", "matrix",
                          "boundary_errors"), list(REPORT_CASES.values()), ids=list(REPORT_CASES))
def test_report_cases_match_hand_computed_figures(gold, predicted, scores, word_accuracy, matrix,
                                                  boundary_errors):
    report = entity_report(gold, predicted)
    assert (report["precision"], report["recall"], report["f1"]) == pytest.approx(scores)
    assert report["word_accuracy"] == pytest.approx(word_accuracy)
    assert report["confusion"]["matrix"] == matrix
    assert report["boundary_errors"] == boundary_errors
    # Every gold entity lands once: in a matrix row of its type or among the boundary errors.
    gold_in_matrix = sum(sum(row) for row in matrix[:-1])
    assert gold_in_matrix + sum(boundary_errors.values()) == report["num_gold_entities"]


def test_given_types_fix_the_order_and_count_in_the_macro_mean():
    report = entity_report([["B-PER", "O"]], [["B-PER", "O"]], types=["PER", "LOC", "MISC"])
    assert list(report["per_type"]) == ["PER", "LOC", "MISC"]
    assert report["per_type"]["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                          "support": 0}
    # PER 1, LOC 0, MISC 0: (1 + 0 + 0) / 3
    assert report["macro_f1"] == pytest.approx(1 / 3)
    assert report["confusion"]["labels"] == ["PER", "LOC", "MISC", "O"]
    assert report["boundary_errors"] == {"PER": 0, "LOC": 0, "MISC": 0}


@pytest.mark.parametrize(("gold", "predicted", "types", "message"), [
    ([["O"], ["O", "O"]], [["O"], ["O"]], None, "sentence 1 has 2 gold tags but 1"),
    ([["O"]], [["O"], ["O"]], None, "1 gold sentences but 2 predicted"),
    (["B-PER", "O"], ["B-PER", "O"], None, "sentence 0 is a string"),
    ([["O"], ["O", "E-PER"]], [["O"], ["O", "O"]], None, "gold sentence 1: 'E-PER'"),
    ([["B-PER"]], [["B-ORG"]], ["PER"], r"missing from types: \['ORG'\]"),
    ([["B-PER"]], [["B-PER"]], ["PER", "PER"], "distinct"),
    ([["B-PER"]], [["B-PER"]], ["PER", "O"], "distinct"),
])
def test_report_rejects_inconsistent_input(gold, predicted, types, message):
    with pytest.raises(ValueError, match=message):
        entity_report(gold, predicted, types)


# --- cross-check against seqeval (a test-only dependency) -------------------------------------

# Handmade sentences that probe the edges where conlleval and strict IOB2 part ways.
SEQEVAL_GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC"],
    ["I-PER", "I-PER", "O"],
    ["B-ORG", "I-LOC", "I-LOC", "B-LOC"],
    [],
    ["O", "O", "O"],
    ["B-MISC", "B-MISC", "I-MISC"],
    ["B-PER", "I-PER", "I-PER", "I-ORG", "O", "I-ORG"],
    ["I-LOC"],
    ["B-LOC", "I-LOC", "O", "B-PER", "I-PER"],
    ["O", "B-ORG", "O", "B-ORG", "I-ORG"],
    ["B-PER"],
    ["B-LOC", "O", "I-LOC", "B-MISC", "I-PER"],
]
SEQEVAL_PREDICTED = [
    ["B-PER", "I-PER", "O", "B-ORG"],
    ["B-PER", "I-PER", "O"],
    ["B-ORG", "I-ORG", "I-LOC", "I-LOC"],
    [],
    ["I-MISC", "O", "B-PER"],
    ["B-MISC", "I-MISC", "I-MISC"],
    ["B-PER", "I-PER", "O", "I-ORG", "O", "B-ORG"],
    ["O"],
    ["B-LOC", "I-LOC", "O", "I-PER", "I-PER"],
    ["O", "B-ORG", "O", "B-ORG", "I-ORG"],
    ["I-PER"],
    ["B-LOC", "I-LOC", "I-LOC", "I-MISC", "B-PER"],
]


def _random_sentences(seed: int, count: int) -> tuple[list[list[str]], list[list[str]]]:
    """Gold and predicted BIO-ish tags, I- starts and type switches included, from a seed."""
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "I-MISC"]
    rng = random.Random(seed)
    lengths = [rng.randint(0, 12) for _ in range(count)]
    gold = [[rng.choice(tags) for _ in range(length)] for length in lengths]
    predicted = [[rng.choice(tags) for _ in range(length)] for length in lengths]
    return gold, predicted


RANDOM_GOLD, RANDOM_PREDICTED = _random_sentences(seed=20240607, count=200)
SEQEVAL_CORPORA = {
    "handmade": (SEQEVAL_GOLD, SEQEVAL_PREDICTED),
    "random": (RANDOM_GOLD, RANDOM_PREDICTED),
    # smaller slices give more comparisons where a single slip would show
    **{f"random {start}-{start + 20}": (RANDOM_GOLD[start:start + 20],
                                        RANDOM_PREDICTED[start:start + 20])
       for start in range(0, 200, 40)},
}


def _seqeval_scores(gold, predicted, **mode) -> dict[str, float]:
    metrics = pytest.importorskip("seqeval.metrics")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns at every 0/0, which it scores as 0
        return {name: float(score(gold, predicted, **mode)) for name, score in [
            ("precision", metrics.precision_score), ("recall", metrics.recall_score),
            ("f1", metrics.f1_score)]}


@pytest.mark.parametrize(("gold", "predicted"), list(SEQEVAL_CORPORA.values()),
                         ids=list(SEQEVAL_CORPORA))
def test_scores_match_seqeval(gold, predicted):
    scheme = pytest.importorskip("seqeval.scheme")
    report = entity_report(gold, predicted)
    conlleval = {name: report[name] for name in ("precision", "recall", "f1")}
    assert conlleval == pytest.approx(_seqeval_scores(gold, predicted))
    assert report["strict"] == pytest.approx(
        _seqeval_scores(gold, predicted, mode="strict", scheme=scheme.IOB2))


@pytest.mark.parametrize(("gold", "predicted"), list(SEQEVAL_CORPORA.values()),
                         ids=list(SEQEVAL_CORPORA))
def test_per_type_f1_matches_seqeval(gold, predicted):
    metrics = pytest.importorskip("seqeval.metrics")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seqeval_report = metrics.classification_report(gold, predicted, output_dict=True)
    per_type = entity_report(gold, predicted)["per_type"]
    assert set(per_type) == set(seqeval_report) - {"micro avg", "macro avg", "weighted avg"}
    for entity_type, row in per_type.items():
        assert row["f1"] == pytest.approx(seqeval_report[entity_type]["f1-score"])
        assert row["support"] == seqeval_report[entity_type]["support"]


def test_spans_match_seqeval_sentence_by_sentence():
    sequence_labeling = pytest.importorskip("seqeval.metrics.sequence_labeling")
    scheme = pytest.importorskip("seqeval.scheme")
    for tags in SEQEVAL_GOLD + SEQEVAL_PREDICTED + RANDOM_GOLD + RANDOM_PREDICTED:
        # seqeval's default mode gives (type, start, end inclusive)
        conlleval = [(start, end + 1, entity_type) for entity_type, start, end
                     in sequence_labeling.get_entities(list(tags))]
        strict = [(entity.start, entity.end, entity.tag)
                  for entity in scheme.Tokens(list(tags), scheme.IOB2).entities]
        assert entity_spans(tags, strict=False) == conlleval, tags
        assert entity_spans(tags, strict=True) == strict, tags
