"""Every kind gives the shared jobs what kiwb/kinds/seams.py says a seam takes: each required
seam, no seam the table does not know, and functions whose parameters are the seam's, by name
and in order (a renamed or reordered parameter breaks a positional call from a shared job)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from kiwb.kinds import KINDS, SEQUENCE, run_seam
from kiwb.kinds.seams import SEAMS


def seam_function(target: str):
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_provides_every_required_seam_and_only_known_ones(kind):
    named = set(KINDS[kind].seams)
    assert named <= set(SEAMS), named - set(SEAMS)
    assert {seam.name for seam in SEAMS.values() if seam.required} <= named


@pytest.mark.parametrize("kind, seam", sorted((kind, seam) for kind, described in KINDS.items()
                                              for seam in described.seams))
def test_a_seams_function_takes_the_seams_parameters(kind, seam):
    declared = SEAMS[seam]
    parameters = list(inspect.signature(seam_function(KINDS[kind].seams[seam])).parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert tuple(p.name for p in positional) == declared.parameters
    with_defaults = tuple(p.name for p in positional if p.default is not p.empty)
    assert with_defaults == declared.defaults, "a caller may leave out exactly these"
    takes_options = any(p.kind == p.VAR_KEYWORD for p in parameters)
    assert takes_options == declared.options


def test_an_unknown_seam_is_a_callers_error_named_with_the_known_ones():
    with pytest.raises(ValueError, match="no seam 'evaluat'; the seams are score_shard, "):
        run_seam(SEQUENCE, "evaluat")
    with pytest.raises(ValueError, match="the sequence kind provides no 'export'"):
        run_seam(SEQUENCE, "export")


# The modules every kind shares: the CLI, the core math, the project, the workers, the
# workbench. A kind's own code lives in kiwb/kinds/<name>/; the demos build one kind each.
SHARED = [path for path in sorted((Path(__file__).parent.parent / "kiwb").rglob("*.py"))
          if path.parent.name != "demo" and "kinds" not in path.parts]


def kind_name_branches(source: str) -> list[str]:
    """Lines of `source` that branch on a teacher kind by its name (a comparison with it, a
    test of membership in a literal naming it) or import one kind's code."""
    names = "|".join(re.escape(kind) for kind in KINDS)
    quoted = rf"""["']({names})["']"""
    branch = re.compile(rf"(==|!=)\s*{quoted}|{quoted}\s*(==|!=)|\bin\s*[(\[{{][^)\]}}]*{quoted}"
                        r"|from kiwb\.kinds\.(?!base\b|seams\b)[\w.]+ import"
                        r"|from kiwb\.kinds import [^\n]*\b(SEQUENCE|TOKEN|MULTI_LABEL|MULTI_TASK"
                        r"|EMBEDDING)\b")
    found = [line.strip() for line in source.splitlines() if branch.search(line)]
    # an import in parentheses, over several lines
    found += [match.group(0) for match in re.finditer(
        r"from kiwb\.kinds import \([^)]*\b(SEQUENCE|TOKEN|MULTI_LABEL|MULTI_TASK|EMBEDDING)\b"
        r"[^)]*\)", source)]
    return found


def test_the_grep_finds_a_branch_on_a_kind():
    assert kind_name_branches('    if kind == "token":\n    x = 1\n') == ['if kind == "token":']
    assert kind_name_branches("if 'embedding' != summary.kind:") != []
    assert kind_name_branches('if kind in ("multi-task", "x"):') != []
    assert kind_name_branches("    from kiwb.kinds.token.tags import read_tag_set") != []
    assert kind_name_branches("from kiwb.kinds import TOKEN, kind_named") != []
    assert kind_name_branches("from kiwb.kinds import (\n    EMBEDDING,\n    KINDS,\n)") != []
    assert kind_name_branches('if figures["kind"] == SINGLE_LABEL_TASK:') == []
    assert kind_name_branches("from kiwb.kinds import kind_named, run_seam") == []


@pytest.mark.parametrize("path", SHARED, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_a_shared_module_branches_on_no_kind_by_name(path):
    """What differs per kind is a kind attribute or seam (kiwb/kinds/base.py), so that a new
    kind is a package beside the others, not branches through the shared code."""
    assert kind_name_branches(path.read_text(encoding="utf-8")) == []


def test_a_kind_is_described_by_three_concerns_each_of_its_own_attributes():
    """TeacherKind is how a checkpoint is read, how results are worded and what the jobs do
    (its seams); every attribute belongs to one of them, and every kind gives each one's
    attributes that have no default."""
    from kiwb.kinds.base import CheckpointReading, JobBehaviour, ResultWording, TeacherKind

    parts = (CheckpointReading, ResultWording, JobBehaviour)
    assert all(issubclass(TeacherKind, part) for part in parts)
    declared = [set(part.__annotations__) for part in parts]
    assert all(not (a & b) for number, a in enumerate(declared) for b in declared[number + 1:])
    for part in parts:
        required = [name for name in part.__annotations__ if not hasattr(part, name)]
        assert required, part  # each concern asks something of a kind
        for kind in KINDS.values():
            assert all(hasattr(kind, name) for name in required), (kind.name, part.__name__)
