"""Tiny NER teachers: sentences tagged as promised, tags written in each scheme, and teachers
that reload as token classifiers and tag their own entity types, and only those."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_ner import (
    ENTITY_WORDS,
    TEACHER_A_TYPES,
    TEACHER_B_TYPES,
    build_ner_teacher,
    encode_tags,
    entity_spans,
    make_sentences,
    own_tags,
    predict_tags,
    tag_names,
)

FRESH_SEED = 777  # no teacher trains on this seed's sentences
TEACHER_TYPES = {"a": TEACHER_A_TYPES, "b": TEACHER_B_TYPES}
TEACHER_CLASSES = {"a": "BertForTokenClassification", "b": "RobertaForTokenClassification"}


@pytest.fixture(scope="module")
def ner_teachers(tmp_path_factory) -> dict[str, Path]:
    """Two trained tiny NER teachers with different architectures, tokenizers and types."""
    root = tmp_path_factory.mktemp("ner_teachers")
    return {
        "a": build_ner_teacher(root / "teacher_a", "bert", TEACHER_A_TYPES, seed=1),
        "b": build_ner_teacher(root / "teacher_b", "roberta", TEACHER_B_TYPES, seed=2),
    }


def load_teacher(folder: Path):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    return model, AutoTokenizer.from_pretrained(folder)


def span_f1(gold_rows: list[list[str]], predicted_rows: list[list[str]]) -> float:
    """Entity F1 over exact (sentence, start, end, type) matches."""
    gold = {(row, *span) for row, tags in enumerate(gold_rows) for span in entity_spans(tags)}
    found = {(row, *span) for row, tags in enumerate(predicted_rows) for span in entity_spans(tags)}
    return 2 * len(gold & found) / (len(gold) + len(found))


def test_sentences_are_the_same_for_a_seed_and_differ_across_seeds():
    assert make_sentences(40, seed=3) == make_sentences(40, seed=3)
    assert make_sentences(40, seed=3) != make_sentences(40, seed=4)


def test_sentences_hold_5_to_12_words_and_0_to_3_entities_tagged_bio():
    rows = make_sentences(300, seed=5)
    names = {(kind, name) for kind, listed in ENTITY_WORDS.items() for name in listed}
    for row in rows:
        spans = entity_spans(row["tags"])
        assert 5 <= len(row["tokens"]) <= 12 and row["text"] == " ".join(row["tokens"])
        assert row["tags"] == encode_tags(len(row["tokens"]), spans, "bio")  # well-formed BIO2
        assert all((kind, " ".join(row["tokens"][start:end])) in names
                   for start, end, kind in spans)
    counts = {len(entity_spans(row["tags"])) for row in rows}
    two_word_entities = [s for row in rows for s in entity_spans(row["tags"]) if s[1] - s[0] == 2]
    assert counts == {0, 1, 2, 3} and two_word_entities


def test_sentences_of_given_types_hold_only_those_types():
    rows = make_sentences(100, seed=6, types=("LOC",))
    kinds = {span[2] for row in rows for span in entity_spans(row["tags"])}
    assert kinds == {"LOC"}


@pytest.mark.parametrize(
    ("scheme", "tags"),
    [
        ("bio", ["B-PER", "B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-PER"]),
        # IOB1 begins with B- only the entity that directly follows one of its own type.
        ("iob1", ["I-PER", "B-PER", "I-PER", "I-PER", "O", "I-LOC", "I-PER"]),
        ("bioes", ["S-PER", "B-PER", "I-PER", "E-PER", "O", "S-LOC", "S-PER"]),
    ],
)
def test_spans_are_written_in_each_scheme_and_read_back(scheme, tags):
    spans = [(0, 1, "PER"), (1, 4, "PER"), (5, 6, "LOC"), (6, 7, "PER")]
    assert encode_tags(7, spans, scheme) == tags
    assert entity_spans(tags) == spans


def test_tag_names_list_o_then_each_types_prefixes():
    assert tag_names(("LOC", "MISC")) == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    assert tag_names(("PER",), "iob1") == ["O", "B-PER", "I-PER"]
    assert tag_names(("PER",), "bioes") == ["O", "B-PER", "I-PER", "E-PER", "S-PER"]


@pytest.mark.parametrize("name", ["a", "b"])
def test_teachers_reload_as_token_classifiers_with_their_tag_sets(ner_teachers, name):
    model, _ = load_teacher(ner_teachers[name])
    assert type(model).__name__ == TEACHER_CLASSES[name]
    assert model.config.id2label == dict(enumerate(tag_names(TEACHER_TYPES[name])))


@pytest.mark.parametrize("name", ["a", "b"])
def test_teacher_tokenizers_split_words_into_a_few_known_pieces(ner_teachers, name):
    _, tokenizer = load_teacher(ner_teachers[name])
    words = sorted({word for names in ENTITY_WORDS.values() for name in names
                    for word in name.split()})
    encoded = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
    pieces = [encoded.word_ids().count(index) for index in range(len(words))]
    assert tokenizer.unk_token_id not in encoded["input_ids"]
    # Some names stay whole, some split, none shred so far that a sentence outgrows the model.
    assert 1 in pieces and sum(pieces) / len(pieces) <= 3 and 1 < max(pieces) <= 8


@pytest.mark.parametrize("name", ["a", "b"])
def test_teachers_tag_their_own_types_on_fresh_sentences(ner_teachers, name):
    model, tokenizer = load_teacher(ner_teachers[name])
    rows = make_sentences(100, seed=FRESH_SEED)
    gold = [own_tags(row, TEACHER_TYPES[name]) for row in rows]
    assert span_f1(gold, predict_tags(model, tokenizer, rows)) >= 0.8


@pytest.mark.parametrize(("name", "other"), [("a", "b"), ("b", "a")])
def test_teachers_tag_the_other_teachers_entities_mostly_o(ner_teachers, name, other):
    model, tokenizer = load_teacher(ner_teachers[name])
    rows = make_sentences(100, seed=FRESH_SEED)
    predicted = predict_tags(model, tokenizer, rows)
    foreign = [tag for row, tags in zip(rows, predicted, strict=True)
               for gold, tag in zip(row["tags"], tags, strict=True)
               if gold[2:] in TEACHER_TYPES[other]]
    assert len(foreign) >= 50 and foreign.count("O") / len(foreign) >= 0.9


@pytest.mark.parametrize(("arch", "scheme"), [("bert", "iob1"), ("roberta", "bioes")])
def test_teachers_in_other_schemes_learn_their_tag_names(tmp_path, arch, scheme):
    folder = build_ner_teacher(tmp_path / scheme, arch, TEACHER_B_TYPES, scheme=scheme, seed=3)
    model, tokenizer = load_teacher(folder)
    assert list(model.config.id2label.values()) == tag_names(TEACHER_B_TYPES, scheme)
    rows = make_sentences(100, seed=FRESH_SEED)
    gold = [own_tags(row, TEACHER_B_TYPES, scheme) for row in rows]
    predicted = predict_tags(model, tokenizer, rows)
    # Word-level agreement in the scheme's own names shows it was trained in that scheme.
    pairs = [pair for both in zip(gold, predicted, strict=True) for pair in zip(*both, strict=True)]
    assert sum(g == p for g, p in pairs) / len(pairs) >= 0.95
    assert span_f1(gold, predicted) >= 0.8


def test_untrained_teacher_saves_and_reloads(tmp_path):
    folder = build_ner_teacher(tmp_path / "untrained", "roberta", ("PER",), trained=False)
    model, tokenizer = load_teacher(folder)
    assert model.config.id2label == {0: "O", 1: "B-PER", 2: "I-PER"}
    assert len(predict_tags(model, tokenizer, make_sentences(3, seed=1))[0]) >= 5
