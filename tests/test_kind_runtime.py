"""Every kind has one runtime, and each is what kiwb.kinds.runtime.KindRuntime says the shared
jobs may call: every method, its parameters by name and in order (a renamed or reordered
parameter breaks a positional call from a shared job), the ones a caller may leave out, and
whether it takes more options."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from kiwb.kinds import KINDS
from kiwb.kinds.runtime import KindRuntime, RuntimeDefaults
from kiwb.kinds.runtimes import RUNTIMES, runtime_of

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
         "print(sorted({'torch', 'transformers', 'datasets', 'kiwb.kinds.runtimes'} "
         "& set(sys.modules)))"], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_runtimes_load_torch_only_for_a_jobs_work():
    """Reading a kind's data sets and checking its labels (the CLI's label commands) loads no
    model library: each runtime imports its torch work inside the methods that need it."""
    found = subprocess.run(
        [sys.executable, "-c", "import sys, kiwb.kinds.runtimes, kiwb.workers.project_inputs; "
         "print(sorted({'torch', 'transformers'} & set(sys.modules)))"],
        capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
