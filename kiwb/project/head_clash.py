"""The warning weight-merging tools do not give: two teachers whose classifier heads have the
same shape but different labels. mergekit and its kin average `classifier.weight` like any
tensor, so row 0 of one head (say `admin`) is averaged with row 0 of the other (`math`).
It matters only where merging is in question: `kiwb merge` and the workbench's merge form say
so, `kiwb init` in one short note. Torch-free: read from config.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kiwb.project.config import teacher_model_configs

WIDTH_KEYS = ("hidden_size", "dim", "d_model", "n_embd")  # BERT-likes, DistilBERT, BART, GPT-2


@dataclass(frozen=True)
class HeadShape:
    """A teacher's classifier head as its config.json describes it."""

    teacher: str
    architecture: str
    width: int | None
    labels: tuple[str, ...]


def head_shape(teacher: str, model_config: dict, labels: Sequence[str] | None = None) -> HeadShape:
    """The head of a checkpoint's config.json; `labels`: kiwb.toml's names for its outputs."""
    id2label = model_config.get("id2label") or {}
    count = int(model_config.get("num_labels") or len(id2label) or 0)
    if labels is None:
        labels = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(count)]
    width = next((model_config[key] for key in WIDTH_KEYS if key in model_config), None)
    architectures = model_config.get("architectures") or [""]
    return HeadShape(teacher, str(architectures[0]), width, tuple(labels))


def head_clashes(heads: Sequence[HeadShape]) -> list[str]:
    """One line per pair of teachers whose heads have one shape but other labels."""
    lines = []
    for number, first in enumerate(heads):
        for second in heads[number + 1:]:
            same_shape = (first.architecture == second.architecture and first.width is not None
                          and first.width == second.width
                          and len(first.labels) == len(second.labels))
            if not same_shape or first.labels == second.labels:
                continue
            lines.append(
                f"teachers {first.teacher} and {second.teacher} have classifier heads of the same "
                f"shape ({len(first.labels)} labels x {first.width}) but different labels "
                f"({_short(first.labels)} / {_short(second.labels)}): averaging those heads, as "
                "weight-merging tools such as mergekit do, would mix unrelated labels (kiwb merge "
                "places each label's row in its own slot)")
    return lines


def head_clash_lines(config) -> list[str]:
    """The clashes among a project's teachers whose config.json is here (others are skipped:
    inspecting them says what is wrong)."""
    heads = [head_shape(teacher.name, model_config,
                        list(teacher.labels) if teacher.labels is not None else None)
             for teacher, model_config in teacher_model_configs(config)]
    return head_clashes(heads)


def _short(labels: Sequence[str], shown: int = 4) -> str:
    return ", ".join(labels[:shown]) + (", ..." if len(labels) > shown else "")
