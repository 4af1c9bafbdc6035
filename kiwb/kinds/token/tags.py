"""NER tag sets: a teacher's tag names read in one scheme, spans decoded, union BIO tags."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SCHEMES = ("bio", "iob1", "bioes", "bare")
OUTSIDE = "O"
SEPARATORS = ("-", "_")
# BILOU's L(ast) and U(nit) are BIOES's E(nd) and S(ingle) under other names.
PREFIX_ALIASES = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}
SCHEME_ALIASES = {"iob2": "bio", "bilou": "bioes", "iobes": "bioes"}
SCHEME_PREFIXES = {"bio": ("B", "I"), "iob1": ("B", "I"), "bioes": ("B", "I", "E", "S")}
NORMAL_PREFIXES = ("O", "B", "I", "E", "S")


@dataclass(frozen=True)
class Span:
    """One entity: words start to end (exclusive) of one type."""

    start: int
    end: int
    type: str

    def __post_init__(self) -> None:
        if self.start < 0 or self.end <= self.start:
            raise ValueError(f"span {self.start}..{self.end} of {self.type!r} is empty or negative")


@dataclass(frozen=True)
class TagSet:
    """A teacher's tags read in one scheme: the normalised prefix and entity type of each id."""

    tags: tuple[str, ...]
    scheme: str
    prefixes: tuple[str, ...]
    tag_types: tuple[str | None, ...]
    types: tuple[str, ...]

    @property
    def outside(self) -> int | None:
        """Id of the outside (O) tag, or None."""
        return self.prefixes.index(OUTSIDE) if OUTSIDE in self.prefixes else None

    def type_tag_ids(self, entity_type: str) -> tuple[int, ...]:
        """Ids of the tags of one entity type, in id order."""
        return tuple(i for i, tag_type in enumerate(self.tag_types) if tag_type == entity_type)

    def decode(self, tag_ids: Sequence[int]) -> list[Span]:
        """Entity spans of one sentence from its tag id per word."""
        return decode_spans([(self.prefixes[i], self.tag_types[i]) for i in tag_ids])


def _is_outside(tag: str) -> bool:
    return tag.upper() == OUTSIDE


def _written_prefix(tag: str) -> tuple[str | None, str]:
    """The prefix letter as written (upper case) and the rest; None and the tag when bare."""
    # A prefix is one letter and a separator, so "WORK_OF_ART" stays a whole type name.
    if len(tag) >= 2 and tag[0].isalpha() and tag[1] in SEPARATORS:
        return tag[0].upper(), tag[2:]
    return None, tag


def split_tag(tag: str) -> tuple[str, str | None]:
    """Normalised (prefix, entity type) of one tag name; a bare type name reads as ("I", type)."""
    if _is_outside(tag):
        return OUTSIDE, None
    letter, entity_type = _written_prefix(tag)
    if not entity_type:
        raise ValueError(f"NER tag {tag!r} has no entity type: expected names like B-PER")
    if letter is None:
        return "I", entity_type
    if letter not in PREFIX_ALIASES:
        raise ValueError(f"NER tag {tag!r} has an unknown prefix: expected B, I, E, S, L or U")
    return PREFIX_ALIASES[letter], entity_type


def _refusal(tags: Sequence[str], problem: str) -> ValueError:
    return ValueError(f"NER tags {list(tags)} {problem}")


def _check_names(tags: Sequence[str]) -> None:
    """Refuse names that are no tag at all, a missing or doubled O, and duplicate meanings."""
    written = [(tag, *_written_prefix(tag)) for tag in tags if not _is_outside(tag)]
    untyped = [tag for tag, _, entity_type in written if not entity_type]
    if untyped:
        raise _refusal(untyped, "have no entity type: expected names like B-PER or PER")
    unknown = [tag for tag, letter, _ in written if letter not in (None, *PREFIX_ALIASES)]
    if unknown:
        raise _refusal(unknown, "have an unknown prefix: expected B-, I-, E-, S-, L- or U-")
    outside = [tag for tag in tags if _is_outside(tag)]
    if len(outside) != 1:
        raise _refusal(outside or tags, "are not one outside tag: expected exactly one O tag")
    meanings = [split_tag(tag) for tag in tags]
    duplicates = [tag for tag in tags if meanings.count(split_tag(tag)) > 1]
    if duplicates:
        raise _refusal(duplicates, "mean the same tag: expected each prefix and type once")


def _is_bare(tags: Sequence[str]) -> bool:
    """Whether the entity tags are bare type names; refuses a mix of bare and prefixed."""
    bare = [tag for tag in tags if not _is_outside(tag) and _written_prefix(tag)[0] is None]
    prefixed = [tag for tag in tags if not _is_outside(tag) and tag not in bare]
    if bare and prefixed:
        raise _refusal(bare + prefixed, "mix bare types and prefixed tags: expected one or other")
    return bool(bare)


def _scheme_name(scheme: str) -> str:
    name = SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
    if name not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
    return name


def _detect_scheme(meanings: Sequence[tuple[str, str | None]], bare: bool) -> str:
    """The scheme the tag names show: bare, bioes, iob1 or (by default) bio."""
    if bare:
        return "bare"
    if {prefix for prefix, _ in meanings} & {"E", "S"}:
        return "bioes"
    # BIO and IOB1 share their names (B-X, I-X). Only a type with I- but no B- shows IOB1, as
    # in tag sets built from CoNLL-2003's original data, where B-PER never occurs.
    begun = {entity_type for prefix, entity_type in meanings if prefix == "B"}
    inside = {entity_type for prefix, entity_type in meanings if prefix == "I"}
    return "iob1" if inside - begun else "bio"


def _type_problem(scheme: str, present: set[str]) -> str | None:
    """What one type's tags lack to be read in a scheme, or None when nothing."""
    if scheme == "bio" and "B" not in present:
        return "a B- tag, since every BIO entity begins with B-"
    if scheme == "iob1" and "I" not in present:
        return "an I- tag, since IOB1 entities are runs of I-"
    if scheme == "bioes":
        if not present & {"B", "S"}:
            return "a B- or S- tag to begin its entities"
        if "I" in present and "B" not in present:
            return "a B- tag before its I- tags"
        if ("B" in present) != ("E" in present):
            return "both B- and E- tags, or neither (single words as S-)"
    return None


def _check_scheme_fits(
    read: Sequence[tuple[str, str, str | None]], scheme: str, bare: bool
) -> None:
    """Refuse (tag, prefix, type) triples the scheme cannot read, naming the tags at fault."""
    entity_tags = [tag for tag, prefix, _ in read if prefix != OUTSIDE]
    if (scheme == "bare") != bare:
        expected = "bare type names like PER" if scheme == "bare" else "prefixed tags like B-PER"
        raise _refusal(entity_tags, f"do not fit scheme {scheme!r}: expected {expected}")
    allowed = SCHEME_PREFIXES.get(scheme, ("I",))
    wrong = [tag for tag, prefix, _ in read if prefix not in (OUTSIDE, *allowed)]
    if wrong:
        expected = ", ".join(f"{prefix}-" for prefix in allowed)
        raise _refusal(wrong, f"do not fit scheme {scheme!r}: expected prefixes {expected}")
    for entity_type in dict.fromkeys(t for _, _, t in read if t is not None):
        of_type = [(tag, prefix) for tag, prefix, tag_type in read if tag_type == entity_type]
        problem = _type_problem(scheme, {prefix for _, prefix in of_type})
        if problem:
            named = [tag for tag, _ in of_type]
            raise _refusal(named, f"of type {entity_type!r} lack {problem} ({scheme})")


def _renamed_types(own: tuple[str, ...], override: Sequence[str] | None) -> tuple[str, ...]:
    """The teacher's types, or the override that renames them one for one."""
    if override is None:
        return own
    renamed = tuple(override)
    if len(renamed) != len(own) or len(set(renamed)) != len(renamed) or not all(renamed):
        raise ValueError(
            f"types {list(renamed)} do not rename the teacher's entity types {list(own)}: "
            f"expected {len(own)} distinct names, one for each in that order")
    return renamed


def read_tag_set(
    tags: Sequence[str], *, scheme: str | None = None, types: Sequence[str] | None = None
) -> TagSet:
    """A teacher's tag names (id order) read in the given scheme or the one they show."""
    tags = tuple(tags)
    _check_names(tags)
    bare = _is_bare(tags)
    meanings = [split_tag(tag) for tag in tags]
    own_types = tuple(dict.fromkeys(t for _, t in meanings if t is not None))
    if not own_types:
        raise _refusal(tags, "name no entity type: expected at least one, like B-PER")
    chosen = _detect_scheme(meanings, bare) if scheme is None else _scheme_name(scheme)
    _check_scheme_fits([(tag, *split_tag(tag)) for tag in tags], chosen, bare)
    renaming = dict(zip(own_types, _renamed_types(own_types, types), strict=True))
    return TagSet(
        tags=tags,
        scheme=chosen,
        prefixes=tuple(prefix for prefix, _ in meanings),
        tag_types=tuple(None if t is None else renaming[t] for _, t in meanings),
        types=tuple(renaming.values()),
    )


def union_tags(types: Sequence[str]) -> list[str]:
    """BIO2 tag names of a union of types: O, then B- and I- of each type in the given order."""
    # A type named twice gets its tags once, as union_labels keeps a label once.
    return [OUTSIDE] + [f"{p}-{t}" for t in dict.fromkeys(types) for p in ("B", "I")]


def decode_spans(prefixes_and_types: Sequence[tuple[str, str | None]]) -> list[Span]:
    """Entity spans from the normalised (prefix, type) of each word, in any scheme."""
    # One tolerant reading in the manner of conlleval: an I or E that cannot continue the open
    # span begins one, so bare runs, IOB1 and broken BIO all decode without a special case.
    spans: list[Span] = []
    open_start, open_type = 0, None
    for word, (prefix, entity_type) in enumerate(prefixes_and_types):
        if prefix not in NORMAL_PREFIXES or (prefix == OUTSIDE) != (entity_type is None):
            raise ValueError(f"word {word} has tag ({prefix!r}, {entity_type!r}): expected "
                             "O with no type, or B, I, E or S with a type")
        begins = prefix in ("B", "S") or entity_type != open_type
        if open_type is not None and (prefix == OUTSIDE or begins):
            spans.append(Span(open_start, word, open_type))
            open_type = None
        if prefix != OUTSIDE and open_type is None:
            open_start, open_type = word, entity_type
        if prefix in ("E", "S"):
            spans.append(Span(open_start, word + 1, entity_type))
            open_type = None
    if open_type is not None:
        spans.append(Span(open_start, len(prefixes_and_types), open_type))
    return spans


def spans_to_tags(spans: Sequence[Span], num_words: int) -> list[str]:
    """BIO2 tag names of a sentence of num_words words holding the given spans."""
    tags = [OUTSIDE] * num_words
    for span in spans:
        if span.end > num_words or any(tag != OUTSIDE for tag in tags[span.start : span.end]):
            raise ValueError(f"span {span} overlaps another or runs past {num_words} words")
        inside = [f"I-{span.type}"] * (span.end - span.start - 1)
        tags[span.start : span.end] = [f"B-{span.type}", *inside]
    return tags


def is_valid_bio(tags: Sequence[str]) -> bool:
    """Whether BIO2 tag names are well formed: each I-T follows B-T or I-T."""
    previous_prefix, previous_type = OUTSIDE, None
    for tag in tags:
        try:
            prefix, entity_type = split_tag(tag)
        except ValueError:
            return False
        if _written_prefix(tag)[0] is None and prefix != OUTSIDE:
            return False  # a bare type name is no BIO2 tag
        if prefix not in ("O", "B", "I"):
            return False
        if prefix == "I" and (previous_prefix == OUTSIDE or previous_type != entity_type):
            return False
        previous_prefix, previous_type = prefix, entity_type
    return True
