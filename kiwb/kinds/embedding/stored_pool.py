"""The embedding kind's integration, worker side: the stored score sets of every teacher, read
into tensors, and what follows from them per text: whether each teacher covers the text, and
how reliable it is there (kiwb.kinds.embedding.stability)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kiwb.kinds.embedding import (
    DISPERSION,
    EMBEDDINGS,
    KEPT_SHARE,
    KNOWN_SHARE,
    NOT_SIMILAR,
    PAIR_JOINER,
    SIMILAR,
)
from kiwb.kinds.embedding.stability import reliability
from kiwb.project.config import ProjectConfig
from kiwb.project.store import Store
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.stored_scores import load_scores


@dataclass(frozen=True)
class EncoderScores:
    """One data set's scores by every teacher, in the project's teacher order."""

    teachers: list[str]
    texts: list[str]
    embeddings: list[torch.Tensor]  # per teacher (n, d_t), unit length
    dispersion: torch.Tensor        # (T, n)
    kept_share: torch.Tensor        # (T, n)
    known_share: torch.Tensor       # (T, n)
    score_keys: list[str]
    labels: list[str] | None = None     # the data set's labels (an eval set's)
    partners: list[str] | None = None   # the data set's partner texts (an eval set's)

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(int(teacher.shape[1]) for teacher in self.embeddings)

    def coverage(self, min_kept: float, min_known: float) -> torch.Tensor:
        """(T, n) 1.0 where the teacher reads enough of the text and knows enough of its tokens."""
        return ((self.kept_share >= min_kept) & (self.known_share >= min_known)).float()

    def reliability(self) -> torch.Tensor:
        """(T, n) each text's reliability under each teacher: the share of the data set's texts
        the teacher scatters more under dropout."""
        return torch.stack([reliability(values) for values in self.dispersion])


def encoder_scores(config: ProjectConfig, store: Store, tasks: list[ScoreTask]) -> EncoderScores:
    """Every teacher's stored arrays of one data set (`tasks`: its score tasks, one per teacher)."""
    arrays = [load_scores(config, store, task) for task in tasks]
    table = tasks[0].table

    def stacked(name: str) -> torch.Tensor:
        return torch.stack([torch.from_numpy(found[name]).float() for found in arrays])

    return EncoderScores(
        teachers=[task.teacher.name for task in tasks], texts=table.texts,
        embeddings=[torch.from_numpy(found[EMBEDDINGS]).float() for found in arrays],
        dispersion=stacked(DISPERSION), kept_share=stacked(KEPT_SHARE),
        known_share=stacked(KNOWN_SHARE), score_keys=[task.key for task in tasks],
        labels=table.labels, partners=table.partners)


def judged_coverage(store: Store, pool: EncoderScores, coverage: torch.Tensor,
                    use_labels: bool) -> tuple[torch.Tensor, dict | None]:
    """The coverage after the judgements given to pairs (with [integration] labels or
    --given-labels), and what they did: pairs judged, (teacher, text) places taken, and the
    judgements' fingerprint (None without labels)."""
    if not use_labels:
        return coverage, None
    from kiwb.kinds.embedding.pair_labels import apply_judgements, judged_pairs
    from kiwb.project.labels import all_labels, labels_fingerprint, text_hash

    given = {item.text: item.label for item in all_labels(store.connection)}
    pairs = judged_pairs(given, pool.texts)
    revised, taken = apply_judgements(pool.embeddings, coverage, pairs)
    used = {text_hash(PAIR_JOINER.join((pool.texts[p.first], pool.texts[p.second]))):
            SIMILAR if p.similar else NOT_SIMILAR for p in pairs}
    return revised, {"judged_pairs": len(pairs), "places_taken": taken,
                     "fingerprint": labels_fingerprint(used)}
