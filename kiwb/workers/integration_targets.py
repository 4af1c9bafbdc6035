"""An integration's training targets, kept beside its record (integrations/<key>.npz): what
`kiwb integrate` made is what a training run learns from, read back by the integration's key
rather than integrated a second time. Arrays only (no pickle), written in one rename."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from kiwb.console import console
from kiwb.project.atomic import atomic_write_with
from kiwb.project.paths import ProjectPaths


def save_targets(root: Path, key: str, arrays: dict[str, torch.Tensor]) -> None:
    """Keep an integration's targets under its key (replacing what an earlier run of the same
    integration kept: the same key holds the same targets)."""
    path = ProjectPaths(root).integration_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    values = {name: tensor.detach().cpu().numpy() for name, tensor in arrays.items()}
    atomic_write_with(path, lambda handle: np.savez(handle, **values))


def load_targets(root: Path, key: str) -> dict[str, torch.Tensor] | None:
    """The targets an integration kept, or None where it kept none (it was recorded by a kiwb
    that kept no targets, or its file was removed or damaged): the caller integrates again,
    which writes them afresh."""
    path = ProjectPaths(root).integration_file(key)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {name: torch.from_numpy(stored[name]) for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        console.print(f"{path}: damaged ({type(error).__name__}); integrating again",
                      highlight=False)
        return None
