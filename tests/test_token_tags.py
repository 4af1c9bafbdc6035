"""NER tag sets: schemes detected and normalised, bad tag sets refused by name, spans decoded
tolerantly and written back as BIO, and overlapping spans of teachers clustered by kind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kiwb.kinds.token.clusters import CLUSTER_KINDS, conflict_clusters
from kiwb.kinds.token.tags import (
    Span,
    decode_spans,
    is_valid_bio,
    read_tag_set,
    spans_to_tags,
    split_tag,
    union_tags,
)


def decode_names(tags: list[str]) -> list[tuple[int, int, str]]:
    """Spans of tag names as (start, end, type), the tables' shorthand."""
    return [(s.start, s.end, s.type) for s in decode_spans([split_tag(tag) for tag in tags])]


@pytest.mark.parametrize(
    ("tags", "scheme", "read_as", "prefixes", "types"),
    [
        (["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], None, "bio", "OBIBI", ("PER", "LOC")),
        # CoNLL-2003's original IOB1 data never has B-PER, so a tag set built from it lacks it.
        (["O", "I-PER", "I-LOC", "B-LOC"], None, "iob1", "OIIB", ("PER", "LOC")),
        (["O", "I-PER", "I-ORG"], None, "iob1", "OII", ("PER", "ORG")),
        (["O", "B-PER", "I-PER"], "iob1", "iob1", "OBI", ("PER",)),  # same names as BIO
        (["O", "B-PER", "I-PER"], "IOB2", "bio", "OBI", ("PER",)),
        (["O", "B-PER", "I-PER", "E-PER", "S-PER"], None, "bioes", "OBIES", ("PER",)),
        (["B-ORG", "I-ORG", "L-ORG", "U-ORG", "O"], None, "bioes", "BIESO", ("ORG",)),
        (["B-ORG", "I-ORG", "L-ORG", "U-ORG", "O"], "bilou", "bioes", "BIESO", ("ORG",)),
        (["O", "S-PER", "S-LOC", "B-LOC", "E-LOC"], None, "bioes", "OSSBE", ("PER", "LOC")),
        (["O", "PER", "LOC"], None, "bare", "OII", ("PER", "LOC")),
        (["o", "b_per", "i_per", "B_WORK_OF_ART", "I-WORK_OF_ART"], None, "bio", "OBIBI",
         ("per", "WORK_OF_ART")),
        (["B-LOC", "O", "B-PER", "I-LOC", "I-PER"], None, "bio", "BOBII", ("LOC", "PER")),
        (["O", "B-PER"], None, "bio", "OB", ("PER",)),  # one-word entities only
    ],
)
def test_a_tag_set_is_read_in_the_scheme_its_names_show(tags, scheme, read_as, prefixes, types):
    tag_set = read_tag_set(tags, scheme=scheme)
    assert tag_set.scheme == read_as
    assert "".join(tag_set.prefixes) == prefixes
    assert tag_set.types == types
    assert tag_set.tags == tuple(tags)
    assert tag_set.outside == prefixes.index("O")


def test_each_tag_knows_its_type_and_a_tag_set_decodes_ids():
    tag_set = read_tag_set(["O", "B-PER", "I-PER", "E-PER", "S-PER", "U-LOC"])
    assert tag_set.tag_types == (None, "PER", "PER", "PER", "PER", "LOC")
    assert tag_set.type_tag_ids("PER") == (1, 2, 3, 4)
    assert tag_set.type_tag_ids("LOC") == (5,)
    # S-LOC, O, B-PER I-PER E-PER, S-PER
    assert tag_set.decode([5, 0, 1, 2, 3, 4]) == [
        Span(0, 1, "LOC"), Span(2, 5, "PER"), Span(5, 6, "PER")]


@pytest.mark.parametrize(
    ("tags", "scheme", "named", "expected"),
    [
        (["B-PER", "I-PER"], None, "['B-PER', 'I-PER']", "exactly one O tag"),
        (["O", "B-PER", "o"], None, "['O', 'o']", "exactly one O tag"),
        (["O", "B-", "I_"], None, "['B-', 'I_']", "no entity type"),
        (["O", ""], None, "['']", "no entity type"),
        (["O", "PER", "B-LOC"], None, "['PER', 'B-LOC']", "mix bare types and prefixed"),
        (["O", "X-PER", "B-LOC"], None, "['X-PER']", "unknown prefix"),
        (["O"], None, "['O']", "no entity type"),
        (["O", "B-PER", "B-PER"], None, "['B-PER', 'B-PER']", "same tag"),
        (["O", "B-PER", "b_PER"], None, "['B-PER', 'b_PER']", "same tag"),
        (["O", "B-PER", "E-PER", "L-PER"], None, "['E-PER', 'L-PER']", "same tag"),
        (["O", "I-PER", "E-PER", "S-PER"], None, "['I-PER', 'E-PER', 'S-PER']",
         "B- tag before its I- tags"),
        (["O", "B-PER", "I-PER", "S-PER"], None, "['B-PER', 'I-PER', 'S-PER']",
         "both B- and E- tags"),
        (["O", "E-PER"], None, "['E-PER']", "B- or S- tag"),
        (["O", "B-PER", "E-PER"], "bio", "['E-PER']", "expected prefixes B-, I-"),
        (["O", "I-PER", "B-LOC", "I-LOC"], "bio", "['I-PER']", "a B- tag"),
        (["O", "B-PER"], "iob1", "['B-PER']", "an I- tag"),
        (["O", "B-PER", "I-PER"], "bioes", "['B-PER', 'I-PER']", "both B- and E- tags"),
        (["O", "B-PER"], "bare", "['B-PER']", "bare type names"),
        (["O", "PER"], "bio", "['PER']", "prefixed tags"),
        (["O", "B-PER"], "bmes", "'bmes'", "unknown tag scheme"),
    ],
)
def test_a_tag_set_that_fits_no_scheme_is_refused_naming_its_tags(tags, scheme, named, expected):
    with pytest.raises(ValueError) as refusal:
        read_tag_set(tags, scheme=scheme)
    message = str(refusal.value)
    assert named in message and expected in message and "\n" not in message


def test_types_rename_the_teachers_types_one_for_one_in_order_of_first_appearance():
    tag_set = read_tag_set(["O", "B-per", "I-per", "B-loc", "I-loc"], types=["PER", "LOC"])
    assert tag_set.types == ("PER", "LOC")
    assert tag_set.tag_types == (None, "PER", "PER", "LOC", "LOC")
    assert tag_set.tags == ("O", "B-per", "I-per", "B-loc", "I-loc")  # the teacher's own names
    with pytest.raises(ValueError, match=r"\['PER'\].*\['per', 'loc'\].*2 distinct names"):
        read_tag_set(["O", "B-per", "I-per", "B-loc", "I-loc"], types=["PER"])
    with pytest.raises(ValueError, match="distinct"):  # two types renamed to one would merge
        read_tag_set(["O", "B-per", "I-per", "B-loc", "I-loc"], types=["PER", "PER"])


@pytest.mark.parametrize(
    ("tags", "spans"),
    [
        ([], []),
        (["I-PER", "I-PER", "O"], [(0, 2, "PER")]),  # I without B begins a span
        (["O", "B-PER", "I-PER"], [(1, 3, "PER")]),  # open at the end
        (["B-PER", "I-LOC"], [(0, 1, "PER"), (1, 2, "LOC")]),  # the type changes
        (["B-PER", "B-PER", "I-PER"], [(0, 1, "PER"), (1, 3, "PER")]),
        (["B-PER", "I-PER", "O", "I-PER"], [(0, 2, "PER"), (3, 4, "PER")]),
        (["B-PER", "I-PER", "E-PER", "S-LOC", "S-LOC"],
         [(0, 3, "PER"), (3, 4, "LOC"), (4, 5, "LOC")]),
        (["E-PER", "I-PER"], [(0, 1, "PER"), (1, 2, "PER")]),  # E closes, then I begins anew
        (["B-PER", "S-PER"], [(0, 1, "PER"), (1, 2, "PER")]),  # S closes the open B
        (["B-PER", "I-PER", "O"], [(0, 2, "PER")]),  # BIOES without its E still decodes
        (["B-ORG", "L-ORG", "U-ORG"], [(0, 2, "ORG"), (2, 3, "ORG")]),  # BILOU
        (["PER", "PER", "LOC", "O", "LOC"], [(0, 2, "PER"), (2, 3, "LOC"), (4, 5, "LOC")]),
        # IOB1: B only separates two entities of one type that touch.
        (["I-PER", "I-PER", "B-PER", "I-PER", "I-LOC"],
         [(0, 2, "PER"), (2, 4, "PER"), (4, 5, "LOC")]),
    ],
)
def test_one_tolerant_decoder_reads_every_scheme(tags, spans):
    assert decode_names(tags) == spans


@pytest.mark.parametrize("word_tag", [("O", "PER"), ("B", None), ("X", "PER")])
def test_decoding_refuses_a_word_tag_that_is_not_normalised(word_tag):
    with pytest.raises(ValueError, match="word 1"):
        decode_spans([("O", None), word_tag])


def test_spans_become_bio_tags_and_decode_back():
    spans = [Span(3, 4, "LOC"), Span(0, 1, "PER"), Span(1, 3, "PER")]
    tags = spans_to_tags(spans, 5)
    assert tags == ["B-PER", "B-PER", "I-PER", "B-LOC", "O"]
    assert is_valid_bio(tags)
    assert decode_spans([split_tag(tag) for tag in tags]) == sorted(spans, key=lambda s: s.start)
    # An IOB1 sentence decodes, and its BIO tags are valid where the IOB1 ones are not.
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    bio = spans_to_tags(decode_spans([split_tag(tag) for tag in iob1]), 5)
    assert bio == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert is_valid_bio(bio) and not is_valid_bio(iob1)


def test_spans_that_overlap_or_run_past_the_sentence_have_no_bio_tags():
    with pytest.raises(ValueError, match="overlaps"):
        spans_to_tags([Span(0, 2, "PER"), Span(1, 3, "LOC")], 4)
    with pytest.raises(ValueError, match="past 3 words"):
        spans_to_tags([Span(2, 4, "PER")], 3)
    with pytest.raises(ValueError, match="empty"):
        Span(2, 2, "PER")


@pytest.mark.parametrize(
    ("tags", "valid"),
    [
        ([], True),
        (["O", "B-PER", "I-PER", "O"], True),
        (["B-PER", "B-PER", "I-PER"], True),
        (["b_per", "i_per"], True),
        (["I-PER"], False),
        (["O", "I-PER"], False),
        (["B-PER", "I-LOC"], False),
        (["B-PER", "E-PER"], False),
        (["PER"], False),
        (["X-PER"], False),
    ],
)
def test_bio_is_valid_when_every_inside_tag_continues_its_type(tags, valid):
    assert is_valid_bio(tags) is valid


def test_union_tags_are_bio_in_the_given_type_order():
    assert union_tags(["PER", "LOC", "PER"]) == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    assert union_tags([]) == ["O"]
    assert read_tag_set(union_tags(["LOC", "ORG"])).scheme == "bio"


def clusters_as_rows(spans_per_teacher, num_teachers=None):
    """(start, end, kind, teachers) of each cluster, the tables' shorthand."""
    return [(c.start, c.end, c.kind, c.teachers)
            for c in conflict_clusters(spans_per_teacher, num_teachers)]


PER_0_2 = Span(0, 2, "PER")


@pytest.mark.parametrize(
    ("spans_per_teacher", "num_teachers", "rows"),
    [
        ([[PER_0_2], []], None, [(0, 2, "entity-vs-none", (0,))]),
        ([[PER_0_2], [PER_0_2]], None, [(0, 2, "agree", (0, 1))]),
        ([[PER_0_2], [PER_0_2]], 3, [(0, 2, "entity-vs-none", (0, 1))]),
        ([[Span(1, 3, "PER")], [Span(1, 3, "ORG")]], None, [(1, 3, "type-clash", (0, 1))]),
        # A type clash is named before the boundaries that also differ.
        ([[Span(0, 3, "ORG")], [Span(1, 2, "LOC")]], None, [(0, 3, "type-clash", (0, 1))]),
        ([[PER_0_2], [Span(0, 3, "PER")]], None, [(0, 3, "boundary-clash", (0, 1))]),
        # Spans that only touch share no word.
        ([[PER_0_2], [Span(2, 4, "PER")]], None,
         [(0, 2, "entity-vs-none", (0,)), (2, 4, "entity-vs-none", (1,))]),
        # Teacher 0 and 2 do not overlap, but both overlap teacher 1: one cluster.
        ([[PER_0_2], [Span(1, 4, "PER")], [Span(3, 5, "PER")]], None,
         [(0, 5, "boundary-clash", (0, 1, 2))]),
        ([[Span(2, 3, "LOC")]] * 3, None, [(2, 3, "agree", (0, 1, 2))]),
        ([[Span(2, 3, "LOC")], [], [Span(2, 3, "LOC")]], None,
         [(2, 3, "entity-vs-none", (0, 2))]),
        ([[Span(5, 6, "LOC"), Span(0, 1, "PER")], [Span(0, 1, "PER")], []], None,
         [(0, 1, "entity-vs-none", (0, 1)), (5, 6, "entity-vs-none", (0,))]),
        ([[], []], None, []),
    ],
)
def test_overlapping_spans_of_teachers_cluster_by_kind(spans_per_teacher, num_teachers, rows):
    assert clusters_as_rows(spans_per_teacher, num_teachers) == rows
    assert all(row[2] in CLUSTER_KINDS for row in rows)


def test_a_cluster_holds_its_spans_by_teacher_then_start_even_two_of_one_teacher():
    first, second, middle = Span(0, 2, "ORG"), Span(2, 4, "ORG"), Span(1, 3, "ORG")
    (cluster,) = conflict_clusters([[second, first], [middle]])
    assert (cluster.start, cluster.end, cluster.kind) == (0, 4, "boundary-clash")
    assert cluster.spans == ((0, first), (0, second), (1, middle))
    assert cluster.teachers == (0, 1)
    with pytest.raises(ValueError, match="3 teachers, but 2"):
        conflict_clusters([[first], [], []], num_teachers=2)


def test_the_token_tag_modules_load_no_model_library():
    code = ("import sys, kiwb.kinds.token.clusters; "
            "print([m for m in ('torch', 'transformers', 'textual') if m in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    assert loaded.strip() == "[]"
