"""Linear adapters from a student's hidden size to each teacher's width, trained beside the
student (the multi-task kind's feature adapters, the embedding kind's direct-term projections).
They are kept in the training checkpoints, so a run resumes with them, and left out of the
export: serving needs none."""

from __future__ import annotations

from pathlib import Path

import torch

from kiwb.errors import KiwbError

ADAPTERS = "kiwb_feature_adapters"  # the model's attribute holding them while it trains


def attach_adapters(model, widths: list[int]) -> None:
    """One linear adapter per teacher, from the student's hidden size to the teacher's."""
    hidden = model.config.hidden_size
    setattr(model, ADAPTERS, torch.nn.ModuleList(torch.nn.Linear(hidden, width)
                                                 for width in widths))


def load_adapter_weights(model, folder: Path, setting: str = "feature_weight") -> None:
    """The adapters' weights a training checkpoint kept (save_pretrained saved them with the
    model's own weights; from_pretrained leaves them out, as no model class has them).
    `setting`: the kiwb.toml key that turns them on, for the error when they are missing."""
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    state = {}
    for file in files:
        state.update({name[len(ADAPTERS) + 1:]: value for name, value in load_file(file).items()
                      if name.startswith(ADAPTERS + ".")})
    if not state:
        raise KiwbError(f"{folder}: this checkpoint keeps no feature adapters, though its run "
                        f"trains them; resume it with the {setting} it was started with")
    getattr(model, ADAPTERS).load_state_dict(state)
