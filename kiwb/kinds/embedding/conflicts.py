"""Conflicting pairs of an embedding project: two texts one teacher places close together and
another far apart. Every pair of a large pool is too many to compare (n^2 / 2), so the
candidates are the pairs some teacher finds close (each text's nearest neighbours under each
teacher): a pair no teacher finds close is one they agree on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional

CANDIDATE_NEIGHBOURS = 5  # per text and teacher
_CHUNK = 1024  # rows of the similarity matrix computed at once


@dataclass(frozen=True)
class PairConflict:
    """Two texts (rows of the pool, first < second) and each teacher's cosine of them (None
    where the teacher does not cover both)."""

    first: int
    second: int
    cosines: tuple[float | None, ...]

    @property
    def disagreement(self) -> float:
        """The spread of the covering teachers' cosines: max - min (0 with fewer than two)."""
        known = [value for value in self.cosines if value is not None]
        return max(known) - min(known) if len(known) > 1 else 0.0


def nearest_pairs(unit: Tensor, neighbours: int,
                  progress: Callable[[int], None] | None = None) -> set[tuple[int, int]]:
    """Each text's `neighbours` nearest others under one teacher's unit embeddings (n, d), as
    (first, second) pairs with first < second; computed a block of rows at a time."""
    count = unit.shape[0]
    take = min(neighbours, count - 1)
    found: set[tuple[int, int]] = set()
    if take < 1:
        return found
    for start in range(0, count, _CHUNK):
        block = unit[start:start + _CHUNK] @ unit.T  # (b, n)
        rows = torch.arange(start, start + block.shape[0])
        block[torch.arange(block.shape[0]), rows] = -torch.inf  # not its own neighbour
        for row, columns in zip(rows.tolist(), block.topk(take, dim=1).indices.tolist(),
                                strict=True):
            found.update((min(row, column), max(row, column)) for column in columns)
        if progress is not None:
            progress(block.shape[0])
    return found


def conflicting_pairs(embeddings: Sequence[Tensor], coverage: Tensor, limit: int,
                      neighbours: int = CANDIDATE_NEIGHBOURS,
                      progress: Callable[[int], None] | None = None) -> list[PairConflict]:
    """The `limit` candidate pairs the teachers disagree on most, most first (ties: by rows).
    `embeddings`: each teacher's (n, d_t); `coverage`: (T, n), 1 where the teacher covers the
    text. A teacher's neighbours are sought among the texts it covers only."""
    units = [functional.normalize(teacher.float(), dim=-1) for teacher in embeddings]
    covered = coverage.bool()
    candidates: set[tuple[int, int]] = set()
    for teacher, unit in enumerate(units):
        rows = covered[teacher].nonzero().flatten()
        local = nearest_pairs(unit[rows], neighbours, progress)
        candidates.update((int(rows[a]), int(rows[b])) for a, b in local)
    if not candidates:
        return []
    pairs = torch.tensor(sorted(candidates))  # (P, 2)
    first, second = pairs[:, 0], pairs[:, 1]
    cosines = torch.stack([(unit[first] * unit[second]).sum(-1) for unit in units])  # (T, P)
    both = covered[:, first] & covered[:, second]  # (T, P)
    spread = (torch.where(both, cosines, -torch.inf).max(0).values
              - torch.where(both, cosines, torch.inf).min(0).values)
    spread = torch.where(both.sum(0) > 1, spread, torch.zeros_like(spread))
    order = sorted(range(len(pairs)), key=lambda index: (-float(spread[index]), index))[:limit]
    return [PairConflict(int(first[index]), int(second[index]),
                         tuple(float(cosines[t, index]) if both[t, index] else None
                               for t in range(len(units))))
            for index in order]
