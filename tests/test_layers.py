"""The package's shape, checked: the layer contracts in pyproject.toml, no import cycle among
kiwb's modules, and every library kiwb imports declared as a dependency."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "kiwb"


def _module_files() -> dict[str, Path]:
    """Every module of kiwb by dotted name (a package by its own name, from __init__.py)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _module_files()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_names(module: str, tree: ast.Module, *, module_level: bool) -> Iterator[tuple[str, int]]:
    """(dotted name, line) of each import: with `module_level`, only those that run when the
    module is imported (not inside functions, not under `if TYPE_CHECKING:`)."""
    def walk(statements: list[ast.stmt]) -> Iterator[tuple[str, int]]:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and module_level:
                continue
            if isinstance(node, ast.If) and _is_type_checking(node.test) and module_level:
                yield from walk(node.orelse)
                continue
            if isinstance(node, ast.Import):
                yield from ((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package holding this module, or above
                    package = module.split(".")
                    is_package = module in MODULES and MODULES[module].name == "__init__.py"
                    package = package[: len(package) - node.level + is_package]
                    base = ".".join([*package, *([base] if base else [])])
                for alias in node.names:  # `from kiwb.project import config` names a module
                    yield f"{base}.{alias.name}", node.lineno
            for child in ast.iter_child_nodes(node):  # bodies of if, try, with, class...
                if isinstance(child, ast.stmt):
                    yield from walk([child])
                elif isinstance(child, (ast.excepthandler, ast.match_case)):
                    yield from walk(child.body)
    yield from walk(tree.body)


def _owning_module(name: str) -> str | None:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def import_graph(*, module_level: bool) -> dict[str, dict[str, int]]:
    """kiwb module -> {kiwb module it imports: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line in _imported_names(module, tree, module_level=module_level):
            target = _owning_module(name)
            if target is not None and target != module:
                edges.setdefault(target, line)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    steps = [f"{a} -> {b} ({MODULES[a].relative_to(REPO)}:{graph[a][b]})"
             for a, b in zip(cycle, cycle[1:], strict=False)]
    return "import cycle: " + "; ".join(steps)


def test_no_import_cycle_among_kiwb_modules():
    """No kiwb module imports, through others, one that imports it back: every import counts,
    those inside functions and under `if TYPE_CHECKING:` too (a lazy import only puts the
    circle off to the call; import-linter's contracts count them the same way)."""
    graph = import_graph(module_level=False)
    cycle = find_cycle(graph)
    assert cycle is None, describe(cycle, graph)


def test_the_cycle_finder_names_a_cycle():
    graph = {"kiwb.a": {"kiwb.b": 3}, "kiwb.b": {"kiwb.c": 5}, "kiwb.c": {"kiwb.a": 7}, "kiwb.d": {}}
    assert find_cycle(graph) == ["kiwb.a", "kiwb.b", "kiwb.c", "kiwb.a"]
    assert find_cycle({"kiwb.a": {"kiwb.b": 1}, "kiwb.b": {}}) is None


def test_type_checking_and_function_imports_are_not_module_level():
    source = ("from typing import TYPE_CHECKING\nimport kiwb.errors\n"
              "if TYPE_CHECKING:\n    import kiwb.cli\nelse:\n    import kiwb.launch\n"
              "def later():\n    import kiwb.commands\n"
              "class Holder:\n    import kiwb.report\n")
    tree = ast.parse(source)
    names = [name for name, _ in _imported_names("kiwb.console", tree, module_level=True)]
    assert names == ["typing.TYPE_CHECKING", "kiwb.errors", "kiwb.launch", "kiwb.report"]
    every = {name for name, _ in _imported_names("kiwb.console", tree, module_level=False)}
    assert {"kiwb.cli", "kiwb.commands"} <= every


def _lint_imports() -> str:
    beside_python = Path(sys.executable).parent
    command = shutil.which("lint-imports", path=os.pathsep.join([str(beside_python),
                                                                 os.environ.get("PATH", "")]))
    assert command, "lint-imports is missing: install the test extra (pip install -e '.[test]')"
    return command


def test_the_layer_contracts_hold():
    """The import contracts of pyproject.toml (core, project, tui, workers), imports inside
    functions included."""
    result = subprocess.run([_lint_imports(), "--no-cache"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = re.search(r"Contracts: (\d+) kept, (\d+) broken", result.stdout)
    assert summary and int(summary[1]) >= 4 and summary[2] == "0", result.stdout[-2000:]


def _normalise(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def declared_distributions() -> set[str]:
    """The dependencies, and the extras kiwb's own features install (a tracker's package,
    imported only where report_to names it); not the test extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [requirement for name, requirements in project["optional-dependencies"].items()
              if name != "test" for requirement in requirements]
    return {_normalise(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0])
            for requirement in [*project["dependencies"], *extras]}


def third_party_imports() -> dict[str, str]:
    """Top-level name of each library kiwb imports (anywhere, lazily too) -> where first."""
    found: dict[str, str] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line in _imported_names(module, tree, module_level=False):
            top = name.split(".")[0]
            if top and top != "kiwb" and top not in sys.stdlib_module_names:
                found.setdefault(top, f"{path.relative_to(REPO)}:{line}")
    return found


def test_every_imported_library_is_declared():
    installed = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    missing = []
    for name, where in sorted(third_party_imports().items()):
        # A library not installed here (tomli on Python >= 3.11) goes by its import name.
        distributions = {_normalise(d) for d in installed.get(name, [name])}
        if not distributions & declared:
            missing.append(f"{name} ({where}; distribution {', '.join(sorted(distributions))})")
    assert not missing, "imported but not in [project] dependencies: " + "; ".join(missing)
