"""Uncertainty of an NER teacher per word, over its entity tags only (MUKI §3.5).

A teacher says O confidently on an entity of a type it was never taught, so the entropy of
its whole tag distribution calls it sure exactly where it knows nothing. What it does know is
which of its own types a word would be if it were an entity: the entropy of its distribution
over its entity tags, renormalised without O, is low on its own types and high elsewhere.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from kiwb.core.uncertainty import entropy


def entity_probs(probs: Tensor, entity_ids: Tensor) -> Tensor:
    """(..., C) tag probabilities -> (..., E) over the entity tags alone, renormalised; a word
    with no entity mass at all is spread evenly (nothing is known of it)."""
    entity = probs.index_select(-1, entity_ids)
    total = entity.sum(-1, keepdim=True)
    even = torch.full_like(entity, 1.0 / entity.shape[-1])
    return torch.where(total > 0, entity / total.clamp_min(1e-30), even)


def entity_confidence(probs: Tensor, entity_ids: Tensor) -> Tensor:
    """1 - H(entity tags) / log E per word, in [0, 1]; a teacher of one entity tag (a bare
    tag set of one type) can never hesitate between its tags, so it is 1."""
    count = int(entity_ids.numel())
    if count < 2:
        return torch.ones(probs.shape[:-1], dtype=probs.dtype, device=probs.device)
    spread = entropy(entity_probs(probs, entity_ids)) / math.log(count)
    return (1.0 - spread).clamp(0.0, 1.0)


def word_scores(det_logits: Tensor, pass_logits: Tensor, entity_ids: Tensor,
                outside: int) -> dict[str, Tensor]:
    """Everything scoring stores per word: `det_logits` (W, C), `pass_logits` (K, W, C).

    Probabilities keep O (the targets need it); entropies, confidences and the mutual
    information read the entity tags only; `in_span` marks the words the teacher, dropout
    off, tags as an entity (what the Uncertainty pane counts)."""
    det_probs = det_logits.float().softmax(-1)
    pass_probs = pass_logits.float().softmax(-1)  # (K, W, C)
    mc_probs = pass_probs.mean(0)
    pass_entity = entity_probs(pass_probs, entity_ids)  # (K, W, E)
    mean_entity = pass_entity.mean(0)
    information = (entropy(mean_entity) - entropy(pass_entity).mean(0)).clamp(min=0.0)
    return {
        "det_logits": det_logits.float(),
        "det_probs": det_probs,
        "mc_probs": mc_probs,
        "det_entropy": entropy(entity_probs(det_probs, entity_ids)),
        "mc_entropy": entropy(mean_entity),
        "det_confidence": entity_confidence(det_probs, entity_ids),
        "mc_confidence": entity_confidence(mc_probs, entity_ids),
        "mutual_information": information,
        "in_span": (det_probs.argmax(-1) != outside).float(),
    }
