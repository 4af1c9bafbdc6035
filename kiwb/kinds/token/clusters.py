"""Clusters of overlapping entity spans across NER teachers, each named by how they conflict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kiwb.kinds.token.tags import Span

# In the order they are decided: a cluster is the first kind that fits it.
CLUSTER_KINDS = ("type-clash", "boundary-clash", "entity-vs-none", "agree")


@dataclass(frozen=True)
class Cluster:
    """Spans of several teachers that overlap, directly or through a chain, and their kind."""

    start: int
    end: int
    spans: tuple[tuple[int, Span], ...]  # (teacher index, span), by teacher then start
    kind: str

    @property
    def teachers(self) -> tuple[int, ...]:
        """Indices of the teachers with a span in this cluster, ascending."""
        return tuple(dict.fromkeys(teacher for teacher, _ in self.spans))


def cluster_kind(spans: Sequence[tuple[int, Span]], num_teachers: int) -> str:
    """Which of CLUSTER_KINDS one cluster's (teacher, span) pairs are."""
    if len({span.type for _, span in spans}) > 1:
        return "type-clash"
    if len({(span.start, span.end) for _, span in spans}) > 1:
        return "boundary-clash"
    # A teacher with no span here said O, which means only "none of my types": whether that
    # disagrees depends on the types it knows, which the caller judges.
    if len({teacher for teacher, _ in spans}) < num_teachers:
        return "entity-vs-none"
    return "agree"


def _make_cluster(spans: list[tuple[int, Span]], num_teachers: int) -> Cluster:
    ordered = tuple(sorted(spans, key=lambda pair: (pair[0], pair[1].start)))
    return Cluster(
        start=min(span.start for _, span in spans),
        end=max(span.end for _, span in spans),
        spans=ordered,
        kind=cluster_kind(ordered, num_teachers),
    )


def conflict_clusters(
    spans_per_teacher: Sequence[Sequence[Span]], num_teachers: int | None = None
) -> list[Cluster]:
    """Spans of all teachers grouped where they overlap (transitively), sorted by start."""
    if num_teachers is None:
        num_teachers = len(spans_per_teacher)
    if num_teachers < len(spans_per_teacher):
        raise ValueError(f"spans of {len(spans_per_teacher)} teachers, but {num_teachers} named")
    pairs = sorted(
        ((teacher, span) for teacher, spans in enumerate(spans_per_teacher) for span in spans),
        key=lambda pair: (pair[1].start, pair[0]),
    )
    clusters: list[Cluster] = []
    current: list[tuple[int, Span]] = []
    current_end = 0
    for teacher, span in pairs:
        # Sorted by start, a span joins the cluster when it begins before the cluster ends;
        # spans that only touch (end == start) share no word and stay apart.
        if current and span.start >= current_end:
            clusters.append(_make_cluster(current, num_teachers))
            current = []
        current.append((teacher, span))
        current_end = max(current_end, span.end) if len(current) > 1 else span.end
    if current:
        clusters.append(_make_cluster(current, num_teachers))
    return clusters
