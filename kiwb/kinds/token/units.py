"""A conflict cluster as a text: its sentence with the cluster's words marked.

The store keeps conflicts (instances) and given labels by text; a token project's unit is a
span of a sentence, so its text is the sentence with the span between marks. The same span of
the same sentence is the same text, so a label given to it is found again after rescoring or a
new integration, and a label file names the span a person can read.
"""

from __future__ import annotations

OPEN, CLOSE = "⟦", "⟧"


def marked_text(words: list[str], start: int, end: int) -> str:
    """The sentence's words with words start..end (exclusive) between ⟦ and ⟧."""
    return " ".join([*words[:start], OPEN + " ".join(words[start:end]) + CLOSE, *words[end:]])


def read_marked(text: str) -> tuple[str, int, int] | None:
    """(the sentence's words joined by spaces, start, end) of a marked text; None when the text
    has not exactly one pair of marks around at least one word."""
    if text.count(OPEN) != 1 or text.count(CLOSE) != 1 or text.index(OPEN) > text.index(CLOSE):
        return None
    before, rest = text.split(OPEN)
    inside, after = rest.split(CLOSE)
    if not inside.strip() or (before and not before.endswith(" ")) or (after and not after.startswith(" ")):
        return None
    start = len(before.split())
    end = start + len(inside.split())
    return " ".join([*before.split(), *inside.split(), *after.split()]), start, end


def cluster_teachers(details, teachers) -> str:
    """`a: B-LOC I-LOC (MC 0.91) · b: O O (MC 0.12)`: each teacher's tags over a cluster."""
    return " · ".join(f"{name}: {' '.join(details['tags'].get(name, []))} "
                      f"(MC {confidence:.2f})"
                      for name, confidence in zip(teachers, details["mc"], strict=False))


def cluster_detail(details, teachers) -> list[tuple[str, str]]:
    """A conflict cluster's kind, then per teacher its tags over the span and its confidence
    over its entity tags there (MC dropout and plain), the routing's score."""
    lines = [(f"{details['kind']} · each teacher over the marked words:", "bold")]
    for number, name in enumerate(teachers):
        tags = " ".join(details["tags"].get(name, [])) or "–"
        lines += [(f"{name}: {tags}", "bold"),
                  (f"   confidence MC {details['mc'][number]:.3f}, plain "
                   f"{details['plain'][number]:.3f} · routing score "
                   f"{details['scores'][number]:.3f}", "dim")]
    return lines
