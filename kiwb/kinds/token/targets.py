"""Word targets over the union's BIO2 tags, built per span so that they stay valid BIO.

A teacher's tags are read per word as an entity type (its O, or the type its tags give most
mass to, B and I together) and a boundary (its top tag of that type begins a span or not), and
decoded into spans. Its distribution is then placed into the union's tags by position: a
type's mass goes to I-T on a word that continues a span of type T, to B-T everywhere else. So
a target's top tag follows the teacher's spans: B-T I-T, never B-PER I-ORG. A mixture of
teachers (Soft, Vanilla KD) can still put an I-T first after another type; `repair_bio` moves
that word's I-T mass to B-T, which keeps the type and makes the sequence valid.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from kiwb.kinds.token.tags import OUTSIDE, Span, TagSet, decode_spans


def type_masses(probs: Tensor, tag_set: TagSet) -> Tensor:
    """(W, C) tag probabilities -> (W, 1 + T): O, then each entity type's total mass."""
    columns = [probs[:, [tag_set.outside]].sum(1)]
    for entity_type in tag_set.types:
        columns.append(probs[:, list(tag_set.type_tag_ids(entity_type))].sum(1))
    return torch.stack(columns, dim=1)


def word_readings(probs: Tensor, tag_set: TagSet) -> list[tuple[str, str | None]]:
    """Each word's (prefix, type): the type with the most mass (O included), and the prefix of
    that type's most probable tag, which says where its spans begin."""
    masses = type_masses(probs, tag_set)
    readings = []
    for word, top in enumerate(masses.argmax(1).tolist()):
        if top == 0:
            readings.append((OUTSIDE, None))
            continue
        entity_type = tag_set.types[top - 1]
        ids = list(tag_set.type_tag_ids(entity_type))
        best = ids[int(probs[word, ids].argmax())]
        readings.append((tag_set.prefixes[best], entity_type))
    return readings


def teacher_spans(probs: Tensor, tag_set: TagSet) -> list[Span]:
    """The entity spans one teacher's (W, C) distributions of one text decode to."""
    return decode_spans(word_readings(probs, tag_set))


def placed_in_union(probs: Tensor, tag_set: TagSet, spans: Sequence[Span],
                    union: Sequence[str]) -> Tensor:
    """(W, C) teacher probabilities -> (W, |Y|) over the union's BIO2 tags, by position: a
    type's mass goes to I-T where the word continues one of `spans` of type T, else to B-T."""
    index = {tag: i for i, tag in enumerate(union)}
    continues = [None] * probs.shape[0]
    for span in spans:
        for word in range(span.start + 1, span.end):
            continues[word] = span.type
    masses = type_masses(probs, tag_set)  # (W, 1 + T)
    placed = probs.new_zeros(probs.shape[0], len(union))
    placed[:, index[OUTSIDE]] = masses[:, 0]
    for column, entity_type in enumerate(tag_set.types, start=1):
        inside = torch.tensor([kind == entity_type for kind in continues], dtype=torch.bool)
        placed[:, index[f"B-{entity_type}"]] += torch.where(inside, 0.0, masses[:, column])
        placed[:, index[f"I-{entity_type}"]] += torch.where(inside, masses[:, column], 0.0)
    return placed


def repair_bio(targets: Tensor, union: Sequence[str]) -> Tensor:
    """(W, |Y|) targets of one text whose top tags read as valid BIO2: where an I-T comes
    first after a word whose top tag is neither B-T nor I-T, its mass and B-T's swap."""
    repaired = targets.clone()
    begin = {tag[2:]: i for i, tag in enumerate(union) if tag.startswith("B-")}
    tops = repaired.argmax(1).tolist()
    previous_type = None
    for word, top in enumerate(tops):
        tag = union[top]
        if tag.startswith("I-") and previous_type != tag[2:]:
            first = begin[tag[2:]]
            repaired[word, [top, first]] = repaired[word, [first, top]]
        previous_type = None if tag == OUTSIDE else tag[2:]
    return repaired


def union_coverage(tag_sets: Sequence[TagSet], union: Sequence[str]) -> Tensor:
    """(N, |Y|) bool: the union tags each teacher can say (O, and B-/I- of its types)."""
    mask = torch.zeros(len(tag_sets), len(union), dtype=torch.bool)
    for teacher, tag_set in enumerate(tag_sets):
        for position, tag in enumerate(union):
            mask[teacher, position] = tag == OUTSIDE or tag[2:] in tag_set.types
    return mask


def outside_targets(num_words: int, union: Sequence[str]) -> Tensor:
    """One-hot O for words no teacher tags as an entity: every teacher says "none of mine"."""
    targets = torch.zeros(num_words, len(union))
    targets[:, list(union).index(OUTSIDE)] = 1.0
    return targets
