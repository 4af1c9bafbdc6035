"""The shared code reaches a kind only through its description (kiwb/kinds/base.py) and its
runtime (kiwb/kinds/runtime.py): no branch on a kind's name, no import of one kind's code, and
a description of three concerns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kiwb.kinds import KINDS

# The modules every kind shares: the CLI, the core math, the project, the workers, the
# workbench. A kind's own code lives in kiwb/kinds/<name>/; the demos build one kind each; the
# registry of runtimes (kiwb/workers/kind_runtimes.py) is the one line per kind that names it.
REGISTRY = Path(__file__).parent.parent / "kiwb" / "workers" / "kind_runtimes.py"
SHARED = [path for path in sorted((Path(__file__).parent.parent / "kiwb").rglob("*.py"))
          if path.parent.name != "demo" and "kinds" not in path.parts and path != REGISTRY]


def kind_name_branches(source: str) -> list[str]:
    """Lines of `source` that branch on a teacher kind by its name (a comparison with it, a
    test of membership in a literal naming it) or import one kind's code."""
    names = "|".join(re.escape(kind) for kind in KINDS)
    quoted = rf"""["']({names})["']"""
    branch = re.compile(rf"(==|!=)\s*{quoted}|{quoted}\s*(==|!=)|\bin\s*[(\[{{][^)\]}}]*{quoted}"
                        r"|from kiwb\.kinds\.(?!base\b|runtime\b)[\w.]+ import"
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
    assert kind_name_branches("from kiwb.kinds import kind_named") == []
    assert kind_name_branches("from kiwb.workers.kind_runtimes import runtime_of") == []


@pytest.mark.parametrize("path", SHARED, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_a_shared_module_branches_on_no_kind_by_name(path):
    """What differs per kind is a kind attribute or a runtime method, so that a new
    kind is a package beside the others, not branches through the shared code."""
    assert kind_name_branches(path.read_text(encoding="utf-8")) == []


def test_a_kind_is_described_by_three_parts_each_of_its_own_attributes():
    """TeacherKind is a name and three parts: how a checkpoint is read, how results are
    worded and what the jobs may do (its runtime does the work). No attribute is declared in
    two parts, every kind gives each part's attributes that have no default, and the
    description stays small: 8 members (it had 54 through three mixins; the aim was 20 at
    most), each part at most 25."""
    from kiwb.kinds.base import CheckpointReading, JobBehaviour, ResultWording

    parts = {"checkpoints": CheckpointReading, "words": ResultWording, "jobs": JobBehaviour}
    declared = [set(part.__annotations__) for part in parts.values()]
    assert all(not (a & b) for number, a in enumerate(declared) for b in declared[number + 1:])
    for attribute, part in parts.items():
        required = [name for name in part.__annotations__ if not hasattr(part, name)]
        assert required, part  # each concern asks something of a kind
        for kind in KINDS.values():
            assert isinstance(getattr(kind, attribute), part), (kind.name, attribute)
            assert all(hasattr(getattr(kind, attribute), name) for name in required), \
                (kind.name, part.__name__)
    members = {name for name in dir(KINDS["sequence"]) if not name.startswith("_")}
    assert members == {"name", "title", "checkpoints", "words", "jobs", "check_settings",
                       "check_routing", "check_method"}
    for part in parts.values():  # each part a small interface of its own too
        assert len({name for name in dir(part) if not name.startswith("_")}
                   | set(part.__annotations__)) <= 25, part
