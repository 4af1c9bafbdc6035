"""The demo corpus: short labeled texts expanded deterministically from the shipped
sentence patterns and word lists in `corpus.json` (written for kiwb; no download)."""

from __future__ import annotations

import json
import random
import re
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

CORPUS_RESOURCE = "corpus.json"
SLOT = re.compile(r"\{(\w+)\}")
MAX_ATTEMPTS_PER_TEXT = 50


def corpus_file() -> Traversable:
    """The shipped corpus file, found inside the installed package."""
    return resources.files("kiwb.demo").joinpath(CORPUS_RESOURCE)


@cache
def corpus_spec() -> dict:
    """Topics, their sentence patterns and slot words, as shipped."""
    return json.loads(corpus_file().read_text(encoding="utf-8"))


def topic_labels() -> list[str]:
    """Every topic of the corpus, in the file's order."""
    return list(corpus_spec()["topics"])


def generate(per_label: int, *, seed: int = 0, mixed_share: float = 0.15) -> list[dict[str, str]]:
    """`per_label` distinct texts for every topic, as {"text", "label"} rows, grouped by label.

    A `mixed_share` of each topic's texts come from its mixed patterns, which borrow the
    words of another topic (a political text about hospitals): the conflicting instances.
    """
    spec = corpus_spec()
    rng = random.Random(seed)
    seen: set[str] = set()
    rows = []
    for label in spec["topics"]:
        mixed = [(entry["also"], pattern) for entry in spec["mixed"] if entry["label"] == label
                 for pattern in entry["patterns"]]
        for _ in range(per_label):
            for _attempt in range(MAX_ATTEMPTS_PER_TEXT):
                if mixed and rng.random() < mixed_share:
                    also, pattern = rng.choice(mixed)
                else:
                    also, pattern = None, rng.choice(spec["topics"][label]["patterns"])
                text = _fill(pattern, _slot_words(spec, label, also), rng)
                if text not in seen:
                    break
            else:
                raise ValueError(f"demo corpus: cannot make {per_label} distinct {label} texts")
            seen.add(text)
            rows.append({"text": text, "label": label})
    return rows


def _slot_words(spec: dict, label: str, also: str | None) -> dict[str, list[str]]:
    """The words each slot may take: the topic's own, then the borrowed topic's, then shared."""
    words = dict(spec["shared"])
    if also is not None:
        words.update(spec["topics"][also]["slots"])
    words.update(spec["topics"][label]["slots"])
    return words


def _fill(pattern: str, words: dict[str, list[str]], rng: random.Random) -> str:
    used: set[str] = set()

    def pick(match: re.Match) -> str:
        choices = [word for word in words[match.group(1)] if word not in used] or words[match.group(1)]
        word = rng.choice(choices)
        used.add(word)  # "United beat United" would read badly
        return word

    text = SLOT.sub(pick, pattern)
    return text[0].upper() + text[1:]


def split_by_label(rows: list[dict[str, str]], sizes: dict[str, int], *, seed: int = 0) -> dict[str, list[dict]]:
    """Split rows into named parts holding `sizes[part]` texts of every label, shuffled."""
    rng = random.Random(seed)
    parts: dict[str, list[dict]] = {part: [] for part in sizes}
    by_label: dict[str, list[dict]] = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    for label, label_rows in by_label.items():
        if len(label_rows) < sum(sizes.values()):
            raise ValueError(f"demo corpus: {len(label_rows)} {label} texts, need {sum(sizes.values())}")
        start = 0
        for part, size in sizes.items():
            parts[part] += label_rows[start:start + size]
            start += size
    for part_rows in parts.values():
        rng.shuffle(part_rows)
    return parts
