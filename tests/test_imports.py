"""Start-up stays light: the CLI's help and the core/project layers load no heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "datasets")


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(output.stdout.splitlines()[-1]))


def test_import_kiwb_imports_no_heavy_library():
    loaded = _modules_after("import kiwb, kiwb.cli")
    assert not loaded & set(HEAVY + ("textual",))


def test_help_imports_no_torch():
    loaded = _modules_after(
        "import contextlib, io\nfrom kiwb.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass"
    )
    assert not loaded & set(HEAVY)


def test_project_layer_imports_neither_torch_nor_textual():
    loaded = _modules_after(
        "import importlib, pkgutil, kiwb.project\n"
        "for module in pkgutil.iter_modules(kiwb.project.__path__, 'kiwb.project.'):\n"
        "    importlib.import_module(module.name)"
    )
    assert {"kiwb.project.store", "kiwb.project.processes", "kiwb.project.config"} <= loaded
    assert not loaded & set(HEAVY + ("textual",))


def test_core_imports_no_ui_library():
    loaded = _modules_after(
        "import kiwb.core.integration, kiwb.core.uncertainty, kiwb.core.losses, kiwb.core.mc_dropout"
    )
    assert not loaded & {"textual", "rich", "transformers", "datasets"}


def test_help_lists_the_commands():
    result = subprocess.run([sys.executable, "-m", "kiwb", "--help"], capture_output=True, text=True, check=True)
    for command in ("init", "score", "integrate", "train", "export", "predict"):
        assert command in result.stdout
