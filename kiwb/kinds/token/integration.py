"""Token-level integration (MUKI §3.5): conflict clusters decided by routing, word targets.

Per text, each teacher's words decode into entity spans (kiwb.kinds.token.targets); spans of
all teachers that overlap form a conflict cluster (kiwb.kinds.token.clusters). A cluster is
the unit of routing: each teacher's uncertainty over its entity tags, averaged over the
cluster's words, is its confidence there, and the routing (rank by default, as for texts)
reads those like it reads a text's. The cluster's words then take the winning teacher's
placed distributions (Hard) or the teachers' mixed by the routing (Soft), weighted by the
routing margin; words outside every cluster train towards O at full weight. The baselines
work per word: Vanilla KD on every teacher's entity mass at once, O where all say O; UHC on
each teacher's own tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.core.integration import routing_margin, soft_weights
from kiwb.core.routing import TeacherFeatures
from kiwb.kinds.token.clusters import Cluster, conflict_clusters
from kiwb.kinds.token.tags import Span, TagSet
from kiwb.kinds.token.targets import (
    outside_targets,
    placed_in_union,
    repair_bio,
    teacher_spans,
)
from kiwb.kinds.token.uncertainty import entity_probs


@dataclass(frozen=True)
class WordScores:
    """Every teacher's per-word scores of n texts, words of all texts end to end."""

    tag_sets: Sequence[TagSet]
    union: Sequence[str]
    offsets: Tensor               # (n + 1,) first word of each text, then the total
    det_probs: Sequence[Tensor]   # per teacher (W, C_i)
    det_logits: Sequence[Tensor]  # per teacher (W, C_i)
    mc_probs: Sequence[Tensor]    # per teacher (W, C_i)
    mc_confidence: Tensor         # (W, N) over each teacher's entity tags
    det_confidence: Tensor        # (W, N)
    mutual_information: Tensor    # (W, N)

    @property
    def num_texts(self) -> int:
        return len(self.offsets) - 1

    def words_of(self, text: int) -> slice:
        return slice(int(self.offsets[text]), int(self.offsets[text + 1]))


@dataclass(frozen=True)
class TextClusters:
    """The decoded spans of every teacher and the conflict clusters, text by text."""

    spans: list[list[list[Span]]]     # [text][teacher] -> spans
    clusters: list[Cluster]            # all texts' clusters, text by text
    text_of: Tensor                    # (k,) the text of each cluster


def decode_all(scores: WordScores) -> TextClusters:
    """Each teacher's spans (dropout off: what its targets would carry) and the clusters."""
    spans, clusters, text_of = [], [], []
    for text in range(scores.num_texts):
        words = scores.words_of(text)
        per_teacher = [teacher_spans(probs[words], tag_set)
                       for probs, tag_set in zip(scores.det_probs, scores.tag_sets, strict=True)]
        found = conflict_clusters(per_teacher, len(scores.tag_sets))
        spans.append(per_teacher)
        clusters += found
        text_of += [text] * len(found)
    return TextClusters(spans, clusters, torch.tensor(text_of, dtype=torch.long))


def cluster_words(scores: WordScores, decoded: TextClusters) -> list[Tensor]:
    """The global word indices of each cluster."""
    return [torch.arange(int(scores.offsets[text]) + cluster.start,
                         int(scores.offsets[text]) + cluster.end)
            for cluster, text in zip(decoded.clusters, decoded.text_of.tolist(), strict=True)]


def cluster_features(scores: WordScores, decoded: TextClusters) -> list[TeacherFeatures]:
    """Per teacher, its uncertainty on each cluster as routing reads a text's: confidences and
    mutual information averaged over the cluster's words, and in place of a text's class
    logits the log of its mean distribution over its entity tags (what the margin features
    and class-rank read)."""
    spans = cluster_words(scores, decoded)
    features = []
    for teacher, tag_set in enumerate(scores.tag_sets):
        entity_ids = torch.tensor([i for i, p in enumerate(tag_set.prefixes) if p != "O"])

        def mean(values: Tensor) -> Tensor:
            if not spans:
                return values.new_zeros((0, *values.shape[1:]))
            return torch.stack([values[words].mean(0) for words in spans])

        det_entity = mean(entity_probs(scores.det_probs[teacher], entity_ids))
        mc_entity = mean(entity_probs(scores.mc_probs[teacher], entity_ids))
        features.append(TeacherFeatures(
            mean(scores.mc_confidence[:, teacher]), mean(scores.det_confidence[:, teacher]),
            mean(scores.mutual_information[:, teacher]),
            torch.log(det_entity.clamp_min(1e-12)), mc_entity))
    return features


@dataclass(frozen=True)
class WordIntegration:
    """Word targets and weights, and how each cluster was decided."""

    targets: Tensor      # (W, |Y|), or (W, N, |Y|) for uhc
    weights: Tensor      # (W,)
    routed: Tensor       # (k,) the teacher each cluster went to
    margin: Tensor       # (k,)
    confidences: Tensor  # (k, N) the routing scores used


def placed_per_teacher(scores: WordScores, decoded: TextClusters) -> list[Tensor]:
    """Every teacher's distributions placed into the union by its own spans, (W, |Y|) each."""
    placed = []
    for teacher, tag_set in enumerate(scores.tag_sets):
        parts = [placed_in_union(scores.det_probs[teacher][scores.words_of(text)], tag_set,
                                 decoded.spans[text][teacher], scores.union)
                 for text in range(scores.num_texts)]
        placed.append(torch.cat(parts) if parts else torch.zeros(0, len(scores.union)))
    return placed


def integrate_words(method: str, scores: WordScores, decoded: TextClusters,
                    routing_scores: Tensor, *, tau: float = 0.2, reweight: bool = True,
                    probabilistic: bool = True) -> WordIntegration:
    """The word targets of one method from the clusters' routing scores (k, N)."""
    placed = placed_per_teacher(scores, decoded)
    num_words = int(scores.offsets[-1])
    margin = (routing_margin(routing_scores) if len(routing_scores)
              else routing_scores.new_zeros(0))
    routed = routing_scores.argmax(1) if len(routing_scores) else torch.zeros(0, dtype=torch.long)
    weights = torch.ones(num_words)
    if method == "uhc":
        targets = torch.stack(placed, dim=1)  # (W, N, |Y|): each teacher on its own tags
    elif method == "vanilla-kd":
        targets = _concatenated(scores, placed)
    else:
        targets = outside_targets(num_words, scores.union)
        mix = soft_weights(routing_scores, tau, probabilistic) if method == "muki-soft" else None
        for number, words in enumerate(cluster_words(scores, decoded)):
            if mix is None:
                targets[words] = placed[int(routed[number])][words]
            else:
                targets[words] = sum(mix[number, i] * placed[i][words] for i in range(len(placed)))
            if reweight:
                weights[words] = margin[number]
    if targets.dim() == 2:
        targets = torch.cat([repair_bio(targets[scores.words_of(text)], scores.union)
                             for text in range(scores.num_texts)]) if num_words else targets
    return WordIntegration(targets, weights, routed, margin, routing_scores)


def _concatenated(scores: WordScores, placed: Sequence[Tensor]) -> Tensor:
    """Vanilla KD per word, with every teacher's own O: each teacher's entity tags keep the
    mass it gives them, O gets the product of the teachers' O probabilities (a word is outside
    when every teacher says it is none of its types), and the whole is renormalised. Plain
    concatenation would let one teacher's confident O, which is only "none of mine", outvote
    another's entity."""
    outside = scores.union.index("O")
    mixed = sum(placed)  # (W, |Y|): entity mass of every teacher, and the sum of their O
    product = torch.stack([p[:, outside] for p in placed], dim=1).prod(1)
    mixed[:, outside] = product
    return mixed / mixed.sum(1, keepdim=True).clamp_min(1e-30)
