"""Label-dependency transfer (ANT's transfer indicator and module, adapted to HF classifiers).

ANT's teachers are classifier chains: a confident teacher's positive answer on a shared label
is fed into the other teacher's chain, which re-predicts its remaining labels given that label.
A Hugging Face classifier takes no label input, so the dependency comes from the pool instead:
each teacher's own predictions there say how its labels co-occur, P_t(y_j | y_c).

Where owners disagree on a shared label c of a text (one says yes, the transferee t says no)
and the positive owner is at least as confident on it, t's belief in c is replaced by the
decision y_c = 1, and t's other labels j move by what that changes in its pool statistics:

  logit p'_j = logit p_j + logit P_t(y_j | y_c = 1) - logit P_t(y_j | c as t believed),
  P_t(y_j | c as t believed) = p_c P_t(y_j | y_c = 1) + (1 - p_c) P_t(y_j | y_c = 0).

A transferee already sure of c (p_c = 1) moves nothing; one sure it is absent moves by the full
log-odds lift between c present and absent. Several flipped labels add their shifts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from kiwb.kinds.multilabel.integration import THRESHOLD, check_owners

SMOOTHING = 1.0  # Laplace counts: a label pair never seen together stays away from 0 and 1
EPSILON = 1e-6


@dataclass(frozen=True)
class Cooccurrence:
    """One teacher's P(y_j = 1 | y_c = 1) and P(y_j = 1 | y_c = 0) over its labels, (L, L)
    indexed [c, j], from soft counts of its own predictions on the pool."""

    given_present: Tensor
    given_absent: Tensor


def cooccurrence(probs: Tensor, smoothing: float = SMOOTHING) -> Cooccurrence:
    """Soft co-occurrence of one teacher's (n, L) probabilities, Laplace-smoothed."""
    present = probs.T @ probs  # [c, j] = sum_n p_c p_j
    absent = (1.0 - probs).T @ probs  # [c, j] = sum_n (1 - p_c) p_j
    return Cooccurrence(
        given_present=(present + smoothing) / (probs.sum(0)[:, None] + 2.0 * smoothing),
        given_absent=(absent + smoothing) / ((1.0 - probs).sum(0)[:, None] + 2.0 * smoothing))


def _logit(p: Tensor) -> Tensor:
    return torch.logit(p.clamp(EPSILON, 1.0 - EPSILON))


def transfer_indicator(probs: Tensor, confidences: Tensor, owners: Tensor) -> Tensor:
    """(T, n, L) bool: teacher t owns label c, says no on the text, and another owner says yes
    at least as confidently. Those are the beliefs the transfer overrides."""
    check_owners(probs, owners)
    owned = owners[:, None, :]
    positive = (probs > THRESHOLD) & owned
    # The most confident "yes" among the owners, per (text, label); -inf where nobody says yes.
    best_yes = confidences.masked_fill(~positive, -torch.inf).amax(0)
    return owned & ~positive & (best_yes[None] >= confidences)


def transfer(probs: Tensor, confidences: Tensor, owners: Tensor,
             statistics: list[Cooccurrence]) -> Tensor:
    """Teachers' (T, n, L) probabilities after the transfer; the overridden labels themselves
    are left to the integrator (their owners' answers are integrated as usual)."""
    flips = transfer_indicator(probs, confidences, owners)
    revised = probs.clone()
    for teacher, stats in enumerate(statistics):
        flipped = flips[teacher].to(probs.dtype)  # (n, L): 1 where c is overridden
        if not bool(flipped.any()):
            continue
        p = probs[teacher]  # (n, L)
        # Expected P(y_j | c) under the teacher's own belief p_c, per (text, c, j).
        believed = (p[:, :, None] * stats.given_present[None]
                    + (1.0 - p[:, :, None]) * stats.given_absent[None])
        lift = _logit(stats.given_present)[None] - _logit(believed)  # (n, c, j)
        # A label does not shift itself, and only owned labels of the teacher move.
        lift = lift * (1.0 - torch.eye(p.shape[1], dtype=p.dtype))[None]
        shift = torch.einsum("nc,ncj->nj", flipped, lift) * owners[teacher].to(p.dtype)
        # Only shifted labels are rewritten: the rest keep their probabilities exactly.
        revised[teacher] = torch.where(shift != 0, torch.sigmoid(_logit(p) + shift), p)
    return revised
