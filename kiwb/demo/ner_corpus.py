"""The NER demo corpus: tagged sentences expanded deterministically from the shipped patterns
and name lists in `ner_corpus.json` (written for kiwb; no download).

A pattern is a sentence of space-separated words in which `{TYPE:list}` is an entity of TYPE
(LOC, MISC, ORG or PER) drawn from a name list and `{slot}` is plain words (tagged O). A row
is {"tokens", "tags" (BIO2), "text" (the words joined by spaces)}.
"""

from __future__ import annotations

import json
import random
import re
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

CORPUS_RESOURCE = "ner_corpus.json"
SLOT = re.compile(r"\{(?:([A-Z]+):)?(\w+)\}")
MAX_ATTEMPTS_PER_SENTENCE = 50


def corpus_file() -> Traversable:
    """The shipped corpus file, found inside the installed package."""
    return resources.files("kiwb.demo").joinpath(CORPUS_RESOURCE)


@cache
def corpus_spec() -> dict:
    """The patterns, name lists and plain words, as shipped."""
    return json.loads(corpus_file().read_text(encoding="utf-8"))


def entity_types() -> list[str]:
    """Every entity type the patterns use, sorted (the order the teachers halve)."""
    spec = corpus_spec()
    patterns = spec["patterns"] + spec["ambiguous_patterns"]
    return sorted({kind for pattern in patterns for kind, _ in SLOT.findall(pattern) if kind})


def generate_splits(sizes: dict[str, int], *, seed: int = 0, ambiguous_share: float = 0.25,
                    unseen_share: float = 0.3, teach: str = "teach") -> dict[str, list[dict]]:
    """Distinct tagged sentences for each named part, `sizes[part]` each; an `ambiguous_share`
    of them come from the patterns that give a name list's words another type (the conflicts
    the teachers meet). An `unseen_share` of every name list never appears in the `teach`
    part: the teachers meet those names first in the pool, as a released tagger meets new
    names, and must tell their type from the words around them."""
    spec = corpus_spec()
    rng = random.Random(seed)
    unseen = unseen_names(spec, unseen_share, rng)
    seen_texts: set[str] = set()
    return {part: _sentences(size, spec, rng, ambiguous_share, seen_texts,
                             unseen if part == teach else {})
            for part, size in sizes.items()}


def unseen_names(spec: dict, share: float, rng: random.Random) -> dict[str, set[str]]:
    """Per name list, the `share` of its names (at least one) kept from the teachers."""
    return {name: set(rng.sample(sorted(names), max(1, round(share * len(names)))))
            for name, names in spec["names"].items() if share > 0}


def _sentences(count: int, spec: dict, rng: random.Random, ambiguous_share: float,
               seen_texts: set[str], left_out: dict[str, set[str]]) -> list[dict]:
    rows = []
    for _ in range(count):
        for _attempt in range(MAX_ATTEMPTS_PER_SENTENCE):
            ambiguous = rng.random() < ambiguous_share
            pattern = rng.choice(spec["ambiguous_patterns" if ambiguous else "patterns"])
            row = fill(pattern, spec, rng, left_out)
            if row["text"] not in seen_texts:
                break
        else:
            raise ValueError(f"NER demo corpus: cannot make {count} more distinct sentences")
        seen_texts.add(row["text"])
        rows.append(row)
    return rows


def fill(pattern: str, spec: dict, rng: random.Random,
         left_out: dict[str, set[str]] | None = None) -> dict:
    """One sentence of `pattern`: its words and their BIO2 tags (names in `left_out`, per
    name list, not used)."""
    tokens: list[str] = []
    tags: list[str] = []
    used: set[str] = set()
    for part in pattern.split():
        slot = SLOT.fullmatch(part)
        if slot is None:
            tokens.append(part)
            tags.append("O")
            continue
        entity_type, name = slot.groups()
        choices = ([choice for choice in spec["names"][name]
                    if choice not in (left_out or {}).get(name, ())]
                   if entity_type else spec["words"][name])
        # "Porto beat Porto" reads badly, and would tag one word two ways in one sentence.
        words = rng.choice([choice for choice in choices if choice not in used] or choices)
        used.add(words)
        words = words.split()
        tokens += words
        tags += ([f"B-{entity_type}"] + [f"I-{entity_type}"] * (len(words) - 1)
                 if entity_type else ["O"] * len(words))
    return {"tokens": tokens, "tags": tags, "text": " ".join(tokens)}
