"""Teacher kinds: one package per kind of teacher. kiwb/kinds/base.py says what a kind provides.

  sequence   single-label text classifiers (*ForSequenceClassification)
  token      NER taggers (*ForTokenClassification), integrated per word and span
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kiwb.kinds.base import TeacherKind, TeacherKnowledge
from kiwb.kinds.sequence import KIND as SEQUENCE
from kiwb.kinds.token import KIND as TOKEN

KINDS: dict[str, TeacherKind] = {kind.name: kind for kind in (SEQUENCE, TOKEN)}
DEFAULT_KIND = SEQUENCE.name  # what records written before kinds existed were

__all__ = ["DEFAULT_KIND", "KINDS", "SEQUENCE", "TOKEN", "TeacherKind", "TeacherKnowledge",
           "kind_named", "kind_of_architectures", "common_kind", "run_seam"]


def kind_named(name: str | None) -> TeacherKind:
    """The kind recorded under `name` (None: a record from before kinds, so sequence)."""
    if name is None:
        return SEQUENCE
    if name not in KINDS:
        raise ValueError(f"unknown teacher kind {name!r}; kiwb knows {', '.join(KINDS)}")
    return KINDS[name]


def kind_of_architectures(architectures: Sequence[str]) -> tuple[TeacherKind, str] | None:
    """The kind a checkpoint's `architectures` name, with the matching class; None if none."""
    for kind in KINDS.values():
        found = kind.matches(architectures)
        if found is not None:
            return kind, found
    return None


def common_kind(kinds: Mapping[str, str]) -> str:
    """The one kind of every teacher (name -> kind); mixing kinds is refused in one line."""
    found = sorted(set(kinds.values()))
    if len(found) > 1:
        by_kind = "; ".join(f"{kind}: {', '.join(n for n, k in kinds.items() if k == kind)}"
                            for kind in found)
        raise ValueError(f"the teachers are of different kinds ({by_kind}); kiwb integrates "
                         "teachers of one kind: give the project teachers of one kind only")
    return found[0] if found else DEFAULT_KIND


def run_seam(kind: str | None, seam: str, *args, **kwargs):
    """Call the function a kind names for one of the shared jobs' seams (kiwb/kinds/base.py
    lists them); imported on first use, so describing a kind never loads torch."""
    import importlib

    described = kind_named(kind)
    if seam not in described.seams:
        raise ValueError(f"the {described.name} kind provides no {seam!r}")
    module, function = described.seams[seam].split(":")
    return getattr(importlib.import_module(module), function)(*args, **kwargs)
