"""Weight merging of classifiers fine-tuned from one base: the backbone rules (plain average,
task arithmetic, TIES) and the placement of each teacher's head rows into the union's slots.

Pure tensor math over state dicts (name -> tensor); kiwb.workers.merge loads the teachers and
decides which tensors are the head. Task vectors are τ_i = θ_i − θ_base:

  average          θ = mean_i θ_i                                   (no base needed)
  task arithmetic  θ = θ_base + λ Σ_i τ_i                            (Ilharco et al., 2023)
  TIES             θ = θ_base + λ · disjoint_mean(elect(trim_k(τ_i)))  (Yadav et al., 2023)

TIES trims each task vector to its top-k% entries by magnitude over the whole vector (every
tensor together, as the paper does; mergekit trims per tensor), elects per entry the sign of
the summed trimmed values, and averages only the trimmed values of that sign.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

State = Mapping[str, torch.Tensor]


def task_vectors(base: State, states: Sequence[State], names: Sequence[str]) -> list[dict]:
    """τ_i = θ_i − θ_base over `names`, in float32."""
    return [{name: state[name].float() - base[name].float() for name in names} for state in states]


def average(states: Sequence[State], names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The plain mean of the teachers' tensors."""
    return {name: torch.stack([state[name].float() for state in states]).mean(0)
            for name in names}


def task_arithmetic(base: State, states: Sequence[State], names: Sequence[str],
                    scale: float) -> dict[str, torch.Tensor]:
    """θ_base + λ Σ_i (θ_i − θ_base)."""
    merged = {}
    for name in names:
        total = sum(state[name].float() - base[name].float() for state in states)
        merged[name] = base[name].float() + scale * total
    return merged


def trim(vector: Mapping[str, torch.Tensor], top_k: float) -> dict[str, torch.Tensor]:
    """The task vector with all but its top_k percent of entries (by magnitude, over every
    tensor together) set to zero. Entries tied with the smallest kept magnitude are kept too."""
    if top_k >= 100:
        return {name: value.clone() for name, value in vector.items()}
    magnitudes = torch.cat([value.abs().flatten() for value in vector.values()])
    total = magnitudes.numel()
    keep = max(1, math.ceil(total * top_k / 100))
    # the keep-th largest magnitude is the (total - keep + 1)-th smallest
    threshold = torch.kthvalue(magnitudes, total - keep + 1).values
    return {name: torch.where(value.abs() >= threshold, value, torch.zeros_like(value))
            for name, value in vector.items()}


def elect_signs(trimmed: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Per entry, the sign (+1, −1, or 0 where nothing is left) of the summed trimmed values:
    the direction with the most total magnitude."""
    return {name: torch.sign(sum(vector[name] for vector in trimmed)) for name in trimmed[0]}


def disjoint_mean(trimmed: Sequence[Mapping[str, torch.Tensor]],
                  signs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per entry, the mean of the trimmed values that agree with the elected sign (zeros and
    values of the other sign left out); zero where none agrees."""
    merged = {}
    for name, sign in signs.items():
        values = torch.stack([vector[name] for vector in trimmed])
        agree = (torch.sign(values) == sign) & (values != 0)
        count = agree.sum(0)
        total = torch.where(agree, values, torch.zeros_like(values)).sum(0)
        merged[name] = torch.where(count > 0, total / count.clamp(min=1), torch.zeros_like(total))
    return merged


def ties_direction(base: State, states: Sequence[State], names: Sequence[str],
                   top_k: float) -> dict[str, torch.Tensor]:
    """The disjoint mean of the trimmed task vectors under the elected signs: what TIES adds
    to the base, before λ (so settings of λ share it)."""
    trimmed = [trim(vector, top_k) for vector in task_vectors(base, states, names)]
    return disjoint_mean(trimmed, elect_signs(trimmed))


def ties(base: State, states: Sequence[State], names: Sequence[str], scale: float,
         top_k: float) -> dict[str, torch.Tensor]:
    """θ_base + λ · ties_direction."""
    return scaled_from(base, ties_direction(base, states, names, top_k), scale)


def scaled_from(base: State, direction: Mapping[str, torch.Tensor],
                scale: float) -> dict[str, torch.Tensor]:
    """θ_base + λ · direction, over the direction's tensors."""
    return {name: base[name].float() + scale * value for name, value in direction.items()}


def place_rows(tensors: Sequence[torch.Tensor], outputs: Sequence[Sequence[str]],
               union: Sequence[str]) -> torch.Tensor:
    """The union head's weight (or bias) from each teacher's: row j of teacher i goes to the
    slot of its output outputs[i][j]; a slot several teachers have gets the mean of their rows.
    Every output must have a union slot, and every union slot must be some teacher's output."""
    slot = {name: index for index, name in enumerate(union)}
    outside = [name for names in outputs for name in names if name not in slot]
    if outside:
        raise ValueError(f"{', '.join(outside)} is in no union slot")
    placed = tensors[0].new_zeros((len(union), *tensors[0].shape[1:]), dtype=torch.float32)
    counts = torch.zeros(len(union))
    for tensor, names in zip(tensors, outputs, strict=True):
        for row, name in enumerate(names):
            placed[slot[name]] += tensor[row].float()
            counts[slot[name]] += 1
    missing = [name for name, count in zip(union, counts.tolist(), strict=True) if count == 0]
    if missing:
        raise ValueError(f"no teacher has an output for {', '.join(missing)}")
    return placed / counts.view(-1, *([1] * (placed.dim() - 1)))


def cosine_similarity(first: State, second: State, names: Sequence[str]) -> float:
    """The cosine of the angle between two models' weights over `names`, taken as one vector:
    close to one for a model and its fine-tuned self, close to zero for two models trained from
    independent initialisations (random weights are nearly orthogonal)."""
    dot = sum(float((first[name].float() * second[name].float()).sum()) for name in names)
    size = math.sqrt(sum(float(first[name].float().pow(2).sum()) for name in names)
                     * sum(float(second[name].float().pow(2).sum()) for name in names))
    return dot / size if size else 0.0
