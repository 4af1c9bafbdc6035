"""Teacher kinds: one package per kind of teacher. kiwb/kinds/base.py says what a kind provides.

  sequence   single-label text classifiers (*ForSequenceClassification)
  token      NER taggers (*ForTokenClassification), integrated per word and span
  multi-label  sigmoid text classifiers (problem_type multi_label_classification), per label
  multi-task   several tasks per text (kiwb.toml [[tasks]]), one output slice per task
  embedding    sentence encoders (kiwb.toml [embedding]), merged pair by pair (SimME)

Every package here is a kind: its __init__.py holds KIND, its torch-free description, and
KINDS finds it by being there. What the jobs run for it, its runtime, is the one line a new
kind adds to a registry (kiwb/workers/kind_runtimes.py), where a tool can follow the jobs
into the kind's code.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType

from kiwb.kinds.base import TeacherKind, TeacherKnowledge
from kiwb.kinds.sequence import KIND as SEQUENCE

DEFAULT_KIND = SEQUENCE.name  # a project's kind while nothing says another


def described_kinds(package: ModuleType) -> dict[str, TeacherKind]:
    """The KIND of every package inside `package`, by name: the default kind first (tables and
    refusals list it first), the others by name. A package without a KIND is refused, naming
    it: a folder under kiwb/kinds/ is a kind or nothing."""
    found = []
    for module in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        if not module.ispkg:
            continue
        kind = getattr(importlib.import_module(module.name), "KIND", None)
        if not isinstance(kind, TeacherKind):
            raise ImportError(f"{module.name} is a package under {package.__name__} but holds no "
                              "KIND (a TeacherKind): give it one, or move it out of "
                              f"{package.__name__}")
        found.append(kind)
    names = [kind.name for kind in found]
    if shared := sorted({name for name in names if names.count(name) > 1}):
        raise ImportError(f"two packages under {package.__name__} describe the kind "
                          f"{shared[0]!r}: give each kind a name of its own")
    return {kind.name: kind for kind in sorted(found, key=lambda k: (k.name != DEFAULT_KIND,
                                                                       k.name))}


KINDS: dict[str, TeacherKind] = described_kinds(sys.modules[__name__])

__all__ = ["DEFAULT_KIND", "KINDS", "SEQUENCE", "TeacherKind", "TeacherKnowledge",
           "common_kind", "declared_kind", "described_kinds", "head_kind", "kind_named",
           "kind_of_checkpoint", "unmatched_checkpoint"]


def kind_named(name: str | None) -> TeacherKind:
    """The kind recorded under `name` (None: nothing recorded yet, so the default kind)."""
    if name is None:
        return SEQUENCE
    if name not in KINDS:
        raise ValueError(f"unknown teacher kind {name!r}; kiwb knows {', '.join(KINDS)}")
    return KINDS[name]


def declared_kind(config) -> TeacherKind | None:
    """The kind a project's kiwb.toml declares by a table of its own ([[tasks]], [embedding]),
    or None: then its teachers' heads say."""
    return next((kind for kind in KINDS.values() if kind.checkpoints.declared_by
                 and getattr(config, kind.checkpoints.declared_by, None)), None)


def kind_of_checkpoint(model_config: Mapping, problem_type: str | None = None
                       ) -> tuple[TeacherKind, str] | None:
    """The kind of a checkpoint from its config.json (a dict), with the matching model class;
    None if no kind matches. `problem_type` (kiwb.toml) overrides the checkpoint's."""
    architectures = list(model_config.get("architectures") or [])
    problem_type = problem_type or model_config.get("problem_type")
    for kind in KINDS.values():
        if kind.checkpoints.config_key and model_config.get(kind.checkpoints.config_key):
            found = kind.checkpoints.matches(architectures)
            if found is not None:
                return kind, found
    for kind in KINDS.values():
        if kind.checkpoints.config_key:
            continue
        found = kind.checkpoints.matches(architectures, problem_type)
        if found is not None:
            return kind, found
    return None


def head_kind(architectures: Sequence[str], problem_type: str | None) -> TeacherKind | None:
    """The kind a checkpoint's head names by its model classes and problem_type alone (what an
    encoder's refusal calls it: "a single-label text classification model"), or None."""
    found = kind_of_checkpoint({"architectures": list(architectures),
                                "problem_type": problem_type})
    return found[0] if found is not None else None


def unmatched_checkpoint(model_config: Mapping, problem_type: str | None = None) -> str:
    """Why no kind matches a checkpoint, and the fix: one line after "<folder> is "."""
    architectures = list(model_config.get("architectures") or [])
    problem = problem_type or model_config.get("problem_type")
    if problem is not None and any(name.endswith(SEQUENCE.checkpoints.architecture_suffix)
                                   for name in architectures):
        return (f"a sequence classifier of problem_type {problem!r}, which kiwb does not "
                "integrate; set problem_type in its [[teachers]] entry to "
                '"single_label_classification" (softmax head) or "multi_label_classification" '
                "(sigmoid head)")
    suffixes = " or ".join(dict.fromkeys(f"*{kind.checkpoints.architecture_suffix}"
                                         for kind in KINDS.values()
                                         if kind.checkpoints.declared_by is None))
    encoder = any(name.endswith("Model") for name in architectures)
    return (f"not a sequence classifier nor a token classifier (architectures: "
            f"{', '.join(architectures) or 'none recorded'}); point path at a fine-tuned "
            f"{suffixes} checkpoint (kiwb teach makes one)"
            + ("; to merge sentence encoders instead, add an [embedding] table to kiwb.toml"
               if encoder else ""))


def common_kind(kinds: Mapping[str, str]) -> str:
    """The one kind of every teacher (name -> kind); mixing kinds is refused in one line."""
    found = sorted(set(kinds.values()))
    if len(found) > 1:
        by_kind = "; ".join(f"{kind}: {', '.join(n for n, k in kinds.items() if k == kind)}"
                            for kind in found)
        raise ValueError(f"the teachers are of different kinds ({by_kind}); kiwb integrates "
                         "teachers of one kind: give the project teachers of one kind only")
    return found[0] if found else DEFAULT_KIND
