"""How good an embedding space is, measured with labels the student never trains on:

  kNN accuracy  each text's label by its k nearest other texts (leave-one-out), a majority
                vote with ties going to the label whose voters are closer in sum
  retrieval     each query's partner among every partner text (query i belongs with
                partner i): recall@1, recall@10 and the mean reciprocal rank
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional

KNN_NEIGHBOURS = 10
# Rows of the similarity matrix built at a time: 4,096 x n floats (160 MB at n = 10,000),
# where the whole n x n matrix of a large eval set would not fit.
ROWS_AT_A_TIME = 4096


def knn_accuracy(embeddings: Tensor, labels: Tensor, neighbours: int = KNN_NEIGHBOURS) -> float:
    """Leave-one-out kNN accuracy of (n, d) embeddings with integer labels (n,)."""
    count = embeddings.shape[0]
    if count < 2:
        raise ValueError("kNN accuracy needs two or more labeled texts")
    unit = functional.normalize(embeddings.float(), dim=-1)
    take = min(neighbours, count - 1)
    found = []
    for start in range(0, count, ROWS_AT_A_TIME):
        similarity = unit[start:start + ROWS_AT_A_TIME] @ unit.T
        rows = torch.arange(similarity.shape[0])
        similarity[rows, rows + start] = -torch.inf  # a text is not its own neighbour
        found.append(similarity.topk(take, dim=1))
    closeness = torch.cat([values for values, _ in found])  # (n, k)
    nearest = torch.cat([indices for _, indices in found])
    classes = int(labels.max()) + 1
    votes = torch.zeros(count, classes).scatter_add_(1, labels[nearest], torch.ones(count, take))
    summed = torch.zeros(count, classes).scatter_add_(1, labels[nearest], closeness)
    # The vote first; among tied labels the larger summed similarity (< 1 per voter, so it
    # only breaks ties: a whole vote outweighs any sum of the k closeness values / k).
    score = votes + summed / (take + 1)
    return (score.argmax(1) == labels).float().mean().item()


def retrieval(queries: Tensor, partners: Tensor, ranks: tuple[int, ...] = (1, 10)) -> dict[str, float]:
    """Query i's partner is partner i: recall@k for each k, and the mean reciprocal rank."""
    queries = functional.normalize(queries.float(), dim=-1)
    partners = functional.normalize(partners.float(), dim=-1)
    ranks_found = []
    for start in range(0, queries.shape[0], ROWS_AT_A_TIME):
        similarity = queries[start:start + ROWS_AT_A_TIME] @ partners.T
        own = similarity.diagonal(offset=start)[:, None]
        # 1 = the partner is the closest (ties count for it)
        ranks_found.append((similarity > own).sum(1) + 1)
    rank = torch.cat(ranks_found)
    figures = {f"recall@{k}": (rank <= k).float().mean().item() for k in ranks}
    figures["mrr"] = (1.0 / rank.float()).mean().item()
    return figures


def probe_figures(embeddings: Tensor, labels: Tensor | None,
                  partners: Tensor | None) -> dict[str, float]:
    """Every probe the eval set allows, for one embedding space of its texts (and partners)."""
    figures: dict[str, float] = {}
    if labels is not None:
        figures["knn_accuracy"] = knn_accuracy(embeddings, labels)
    if partners is not None:
        figures.update(retrieval(embeddings, partners))
    return figures


def concatenated(spaces: list[Tensor]) -> Tensor:
    """The teachers' unit embeddings side by side (width: the sum): each teacher's cosine
    counts alike in the joint cosine."""
    return torch.cat([functional.normalize(space.float(), dim=-1) for space in spaces], dim=1)


def averaged(spaces: list[Tensor], seed: int = 0) -> Tensor:
    """The teachers' unit embeddings averaged: as they are where the widths agree, else each
    first mapped by its own random orthonormal projection to the largest width. Independent
    random maps make the cross-teacher terms of a cosine vanish on average, so the average's
    cosines approach the mean of the teachers' (a shared PCA would align nothing)."""
    units = [functional.normalize(space.float(), dim=-1) for space in spaces]
    widths = {unit.shape[1] for unit in units}
    if len(widths) > 1:
        target = max(widths)
        generator = torch.Generator().manual_seed(seed)
        units = [unit @ torch.linalg.qr(torch.randn(target, unit.shape[1],
                                                    generator=generator))[0].T
                 for unit in units]  # (n, d_t) @ (d_t, D): an isometry into D dimensions
    return torch.stack(units).mean(0)
