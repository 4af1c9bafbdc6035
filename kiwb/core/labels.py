"""Alignment of teacher label sets into one union label set, by label name."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch


def union_labels(label_sets: Sequence[Sequence[str]]) -> list[str]:
    """Union of label names in first-appearance order (teacher order, then label order)."""
    # dict keeps insertion order, so the union is deterministic and reproducible.
    return list(dict.fromkeys(label for labels in label_sets for label in labels))


def label_positions(
    label_sets: Sequence[Sequence[str]], union: Sequence[str]
) -> list[torch.Tensor]:
    """Union index of each teacher label, one (C_i,) long tensor per teacher."""
    index = {label: position for position, label in enumerate(union)}
    return [
        torch.tensor([index[label] for label in labels], dtype=torch.long) for labels in label_sets
    ]


def coverage_mask(label_sets: Sequence[Sequence[str]], union: Sequence[str]) -> torch.Tensor:
    """Boolean (N, |Y|) mask: teacher i covers union label j."""
    mask = torch.zeros(len(label_sets), len(union), dtype=torch.bool)
    for teacher, positions in enumerate(label_positions(label_sets, union)):
        mask[teacher, positions] = True
    return mask


def overlapping_labels(label_sets: Sequence[Sequence[str]]) -> list[str]:
    """Label names owned by two or more teachers, in union order."""
    owners = Counter(label for labels in label_sets for label in set(labels))
    return [label for label in union_labels(label_sets) if owners[label] >= 2]


def gold_label_ids(names: Sequence[str], union: Sequence[str]) -> torch.Tensor:
    """(n,) union index of each gold label name; a label no teacher knows is refused, naming
    the first few (DataError: the label column is what to fix)."""
    from kiwb.errors import DataError

    index = {label: position for position, label in enumerate(union)}
    unknown = sorted({name for name in names if name not in index})
    if unknown:
        raise DataError(f"gold labels {', '.join(map(repr, unknown[:5]))} are in no teacher's "
                        f"label set ({', '.join(union)}); fix the label column")
    return torch.tensor([index[name] for name in names], dtype=torch.long)
