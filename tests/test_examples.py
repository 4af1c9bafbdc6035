"""Every example's kiwb.toml loads and validates (its local paths stood in by empty files)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kiwb.project.config import is_hub_id, load_config

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_example_config_is_valid(example, tmp_path):
    folder = tmp_path / example
    shutil.copytree(EXAMPLES / example, folder)
    text = (folder / "kiwb.toml").read_text()
    for value in re.findall(r'^(?:path|student) = "([^"]+)"', text, flags=re.M):
        if is_hub_id(value, folder):
            continue
        target = folder / value
        if target.suffix:  # a data file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("text\nhello\n")
        else:  # a checkpoint folder
            target.mkdir(parents=True, exist_ok=True)
    config = load_config(folder)
    assert config.name
    assert len(config.teachers) >= 2
    config.require_scoring_inputs()
    assert (EXAMPLES / example / "README.md").is_file()
