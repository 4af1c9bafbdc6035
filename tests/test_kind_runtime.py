"""Every kind has one runtime, and each is what kiwb.kinds.runtime.KindRuntime says the shared
jobs may call: every method, its parameters by name and in order (a renamed or reordered
parameter breaks a positional call from a shared job), the ones a caller may leave out, and
whether it takes more options."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from kiwb.kinds import DEFAULT_KIND, KINDS, described_kinds
from kiwb.kinds.runtime import KindRuntime, RuntimeDefaults
from kiwb.workers.kind_runtimes import RUNTIMES, runtime_of

METHODS = [name for name, value in vars(KindRuntime).items()
           if inspect.isfunction(value) and not name.startswith("_")]


def _shape(function) -> tuple:
    """(positional names, names with defaults, takes **options) of a method, without self."""
    parameters = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return (tuple(p.name for p in positional),
            tuple(p.name for p in positional if p.default is not p.empty),
            any(p.kind == p.VAR_KEYWORD for p in parameters))


def test_every_described_kind_has_one_runtime_and_each_runtime_is_its_kinds():
    assert set(RUNTIMES) == set(KINDS)
    for name, runtime in RUNTIMES.items():
        assert runtime.kind is KINDS[name]
        assert runtime_of(KINDS[name]) is runtime  # made once, not per call


def test_every_package_under_kinds_is_a_described_kind():
    """KINDS lists no kind twice and misses none: one per package, the default kind first."""
    folder = Path(importlib.import_module("kiwb.kinds").__file__).parent
    packages = sorted(path.parent.name for path in folder.glob("*/__init__.py"))
    assert sorted(kind.checkpoints.__module__.rsplit(".", 1)[1]
                  for kind in KINDS.values()) == packages
    assert next(iter(KINDS)) == DEFAULT_KIND


def _write_kind(folder: Path, name: str, kind_name: str | None) -> None:
    """A kind package under `folder`: a sequence kind's parts under another name."""
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text(
        "from kiwb.kinds.base import TeacherKind\n"
        "from kiwb.kinds.sequence import SequenceCheckpoints, SequenceJobs, SequenceWords\n"
        + (f"KIND = TeacherKind({kind_name!r}, SequenceCheckpoints(), SequenceWords(), "
           "SequenceJobs())\n" if kind_name else "NOT_A_KIND = 1\n"), encoding="utf-8")


def test_adding_a_kind_is_a_package_and_one_runtime_line(tmp_path, monkeypatch):
    """A package with its KIND is a kind by being there (no list of descriptions to add it to);
    the jobs refuse it until its runtime is registered, naming the one line to add."""
    (tmp_path / "more_kinds").mkdir()
    (tmp_path / "more_kinds" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "more_kinds" / "notes.py").write_text("X = 1\n", encoding="utf-8")  # a module
    _write_kind(tmp_path / "more_kinds", "toy", "toy")
    _write_kind(tmp_path / "more_kinds", "another", "another")
    _write_kind(tmp_path / "more_kinds", "plain", DEFAULT_KIND)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = described_kinds(importlib.import_module("more_kinds"))
    assert list(found) == [DEFAULT_KIND, "another", "toy"]  # the default first, then by name
    assert found["toy"].title == KINDS[DEFAULT_KIND].title
    with pytest.raises(LookupError, match=r"'toy' kind has no runtime: add its runtime class to "
                                          r"RUNTIMES in kiwb/workers/kind_runtimes\.py"):
        runtime_of(found["toy"])

    (tmp_path / "twin_kinds").mkdir()
    (tmp_path / "twin_kinds" / "__init__.py").write_text("", encoding="utf-8")
    _write_kind(tmp_path / "twin_kinds", "one", "toy")
    _write_kind(tmp_path / "twin_kinds", "two", "toy")
    with pytest.raises(ImportError, match=r"two packages under twin_kinds describe the kind "
                                          r"'toy': give each kind a name of its own"):
        described_kinds(importlib.import_module("twin_kinds"))

    _write_kind(tmp_path / "more_kinds", "stray", None)
    with pytest.raises(ImportError, match=r"more_kinds\.stray is a package under more_kinds but "
                                          r"holds no KIND"):
        described_kinds(importlib.import_module("more_kinds"))


def test_the_protocol_lists_the_jobs_calls():
    assert METHODS == ["score_shard", "load_table", "integrate", "prepare_training", "evaluate",
                       "predict", "check_data", "inspect_teachers", "export", "check_labels"]
    assert _shape(KindRuntime.score_shard)[2], "scoring passes the shared options on"
    assert _shape(KindRuntime.load_table)[1] == ("config",)
    assert _shape(KindRuntime.predict)[1] == ("top",)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_kinds_runtime_keeps_the_protocol(kind):
    runtime = RUNTIMES[kind]
    assert isinstance(runtime, KindRuntime)
    for name in METHODS:
        assert _shape(getattr(runtime, name)) == _shape(getattr(KindRuntime, name)), \
            f"{type(runtime).__name__}.{name}"


def test_the_hooks_a_kind_leaves_out_do_the_shared_thing():
    defaults = RuntimeDefaults()
    assert defaults.check_data(None, {}, []) is None
    assert defaults.inspect_teachers(None) is None  # the shared reading of checkpoints
    assert defaults.export(None, "run", None, None, {}, {}) is None  # the shared export
    assert defaults.check_labels("labels.csv", [], None) is False  # nothing checked
    overridden = {kind: sorted(name for name in ("check_data", "inspect_teachers", "export",
                                                 "check_labels")
                               if getattr(type(runtime), name) is not getattr(RuntimeDefaults, name))
                  for kind, runtime in RUNTIMES.items()}
    assert overridden == {"sequence": [], "token": ["check_labels"],
                          "multi-label": ["check_data"], "multi-task": ["inspect_teachers"],
                          "embedding": ["export", "inspect_teachers"]}


def test_describing_the_kinds_loads_no_model_library():
    """The CLI and the workbench read every description; only a job loads a runtime."""
    found = subprocess.run(
        [sys.executable, "-c", "import sys, kiwb.kinds, kiwb.kinds.runtime, kiwb.tui.app; "
         "print(sorted({'torch', 'transformers', 'datasets', 'kiwb.workers.kind_runtimes'} "
         "& set(sys.modules)))"], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_runtimes_load_torch_only_for_a_jobs_work():
    """Reading a kind's data sets and checking its labels (the CLI's label commands) loads no
    model library: each runtime imports its torch work inside the methods that need it."""
    found = subprocess.run(
        [sys.executable, "-c", "import sys, kiwb.workers.kind_runtimes, kiwb.workers.project_inputs; "
         "print(sorted({'torch', 'transformers'} & set(sys.modules)))"],
        capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
