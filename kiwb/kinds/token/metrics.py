"""Entity-level NER metrics from BIO2 tag strings: conlleval and strict IOB2 scores, per-type
scores, word accuracy, and a confusion matrix over entity types with boundary errors apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

OUTSIDE = "O"

# (start, end exclusive, type) of one entity within its sentence
Span = tuple[int, int, str]


def split_tag(tag: str) -> tuple[str, str]:
    """("B" or "I", type) of an entity tag; ("O", "") outside; ValueError for anything else."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    if tag[:2] in ("B-", "I-") and len(tag) > 2:
        return tag[0], tag[2:]
    raise ValueError(f"{tag!r} is not a BIO2 tag: expected 'O', 'B-<type>' or 'I-<type>'")


def entity_spans(tags: Sequence[str], *, strict: bool) -> list[Span]:
    """The entities of one sentence, in order: conlleval style, or strict IOB2 with `strict`."""
    # Conlleval lets a stray I-X open an entity (seqeval's default mode); strict IOB2 opens
    # one only at B-X and drops the I-X words that continue nothing (seqeval strict, IOB2).
    opening_prefixes = ("B",) if strict else ("B", "I")
    spans: list[Span] = []
    start, open_type = 0, None
    for index, tag in enumerate(tags):
        prefix, entity_type = split_tag(tag)
        continues = prefix == "I" and entity_type == open_type
        if open_type is not None and not continues:
            spans.append((start, index, open_type))
            open_type = None
        if prefix in opening_prefixes and not continues:
            start, open_type = index, entity_type
    if open_type is not None:
        spans.append((start, len(tags), open_type))
    return spans


def precision_recall_f1(num_correct: int, num_predicted: int, num_gold: int) -> dict[str, float]:
    """Precision, recall and F1 from counts; an empty denominator gives 0.0."""
    return {
        "precision": num_correct / num_predicted if num_predicted else 0.0,
        "recall": num_correct / num_gold if num_gold else 0.0,
        # 2PR / (P + R) written in counts, so no rounding creeps in and 0/0 stays 0.0
        "f1": 2 * num_correct / (num_predicted + num_gold) if num_predicted + num_gold else 0.0,
    }


def _check_sentences(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> None:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
        if isinstance(gold_tags, str) or isinstance(predicted_tags, str):
            # A flat list of tags would otherwise be read as sentences of one-letter tags.
            raise ValueError(f"sentence {index} is a string; expected a list of tags")
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"sentence {index} has {len(gold_tags)} gold tags "
                             f"but {len(predicted_tags)} predicted ones")


def _corpus_spans(sentences: Sequence[Sequence[str]], *, strict: bool,
                  side: str) -> list[list[Span]]:
    """The entities of each sentence; a bad tag is reported with its side and sentence."""
    spans = []
    for index, tags in enumerate(sentences):
        try:
            spans.append(entity_spans(tags, strict=strict))
        except ValueError as error:
            raise ValueError(f"{side} sentence {index}: {error}") from None
    return spans


def _resolve_types(types: Sequence[str] | None, seen: set[str]) -> list[str]:
    """The entity types to report on: `types` as given (checked), or the sorted types seen."""
    if types is None:
        return sorted(seen)
    types = list(types)
    if len(set(types)) != len(types) or OUTSIDE in types:
        raise ValueError(f"types must be distinct entity types without {OUTSIDE!r}: {types}")
    unlisted = sorted(seen - set(types))
    if unlisted:
        raise ValueError(f"the tags hold entity types missing from types: {unlisted}")
    return types


def _overlaps(first: Span, second: Span) -> bool:
    return first[0] < second[1] and second[0] < first[1]


def _confusion_pairs(gold_spans: list[Span],
                     predicted_spans: list[Span]) -> tuple[list[tuple[str, str]], list[str]]:
    """(gold type or O, predicted type or O) pairs of one sentence, and the types of its gold
    entities that only overlap predictions with other boundaries."""
    predicted_by_span = {(start, end): entity_type for start, end, entity_type in predicted_spans}
    pairs, boundary_errors = [], []
    for gold_span in gold_spans:
        start, end, gold_type = gold_span
        if (start, end) in predicted_by_span:
            pairs.append((gold_type, predicted_by_span[(start, end)]))
        elif any(_overlaps(gold_span, span) for span in predicted_spans):
            boundary_errors.append(gold_type)
        else:
            pairs.append((gold_type, OUTSIDE))
    for predicted_span in predicted_spans:
        if not any(_overlaps(predicted_span, span) for span in gold_spans):
            pairs.append((OUTSIDE, predicted_span[2]))
    return pairs, boundary_errors


def _confusion(gold_spans: list[list[Span]], predicted_spans: list[list[Span]],
               types: list[str]) -> tuple[dict, dict[str, int]]:
    """The confusion matrix (gold down, predicted across) and boundary errors per gold type."""
    labels = [*types, OUTSIDE]
    position = {label: index for index, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    boundary_errors = dict.fromkeys(types, 0)
    for sentence_gold, sentence_predicted in zip(gold_spans, predicted_spans, strict=True):
        pairs, boundary_types = _confusion_pairs(sentence_gold, sentence_predicted)
        for gold_type, predicted_type in pairs:
            matrix[position[gold_type]][position[predicted_type]] += 1
        for gold_type in boundary_types:
            boundary_errors[gold_type] += 1
    return {"labels": labels, "matrix": matrix}, boundary_errors


def _keyed(spans: list[list[Span]]) -> set[tuple[int, int, int, str]]:
    """Every entity of a corpus, keyed by its sentence, so equal spans elsewhere differ."""
    return {(index, *span) for index, sentence in enumerate(spans) for span in sentence}


def _micro_scores(gold_spans: list[list[Span]],
                  predicted_spans: list[list[Span]]) -> dict[str, float]:
    gold, predicted = _keyed(gold_spans), _keyed(predicted_spans)
    return precision_recall_f1(len(gold & predicted), len(predicted), len(gold))


def _per_type(gold_spans: list[list[Span]], predicted_spans: list[list[Span]],
              types: list[str]) -> dict[str, dict]:
    gold, predicted = _keyed(gold_spans), _keyed(predicted_spans)
    gold_counts = Counter(entity[3] for entity in gold)
    predicted_counts = Counter(entity[3] for entity in predicted)
    correct_counts = Counter(entity[3] for entity in gold & predicted)
    return {
        entity_type: {**precision_recall_f1(correct_counts[entity_type],
                                            predicted_counts[entity_type],
                                            gold_counts[entity_type]),
                      "support": gold_counts[entity_type]}
        for entity_type in types
    }


def _word_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    num_words = sum(len(tags) for tags in gold)
    num_right = sum(gold_tag == predicted_tag
                    for gold_tags, predicted_tags in zip(gold, predicted, strict=True)
                    for gold_tag, predicted_tag in zip(gold_tags, predicted_tags, strict=True))
    return num_right / num_words if num_words else 0.0


def entity_report(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                  types: Sequence[str] | None = None) -> dict:
    """Entity scores of predicted BIO2 tags against gold ones, one tag list per sentence.

    Top-level scores, per-type scores, the confusion matrix and the entity counts are
    conlleval style; "strict" repeats micro precision, recall and F1 under strict IOB2.
    `types` fixes the order of per-type rows and may list types that never occur.
    """
    _check_sentences(gold, predicted)
    gold_spans = _corpus_spans(gold, strict=False, side="gold")
    predicted_spans = _corpus_spans(predicted, strict=False, side="predicted")
    # Every non-O tag lies inside some conlleval entity, so these are all the types tagged.
    seen = {span[2] for sentence in gold_spans + predicted_spans for span in sentence}
    types = _resolve_types(types, seen)
    per_type = _per_type(gold_spans, predicted_spans, types)
    confusion, boundary_errors = _confusion(gold_spans, predicted_spans, types)
    strict = _micro_scores(_corpus_spans(gold, strict=True, side="gold"),
                           _corpus_spans(predicted, strict=True, side="predicted"))
    return {
        **_micro_scores(gold_spans, predicted_spans),
        "strict": strict,
        "per_type": per_type,
        "macro_f1": sum(row["f1"] for row in per_type.values()) / len(types) if types else 0.0,
        "word_accuracy": _word_accuracy(gold, predicted),
        "confusion": confusion,
        "boundary_errors": boundary_errors,
        "num_sentences": len(gold),
        "num_words": sum(len(tags) for tags in gold),
        "num_gold_entities": sum(len(spans) for spans in gold_spans),
        "num_predicted_entities": sum(len(spans) for spans in predicted_spans),
    }
