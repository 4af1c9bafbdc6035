"""`kiwb integrate` for sentence encoders: what each teacher covers and how steady it stays on
each text, the pairs the teachers disagree on most (the conflicts list), and on the eval set the
probes of each teacher alone and of the two training-free combinations (concatenation, average),
the figures a student must beat."""

from __future__ import annotations

import numpy as np
import torch

from kiwb.console import console
from kiwb.core.histograms import BINS, unit_histogram
from kiwb.kinds.embedding import KIND, NOT_SIMILAR, PAIR_JOINER, SIMILAR
from kiwb.kinds.embedding.conflicts import PairConflict, conflicting_pairs
from kiwb.kinds.embedding.probes import averaged, concatenated, probe_figures
from kiwb.kinds.embedding.stored_pool import EncoderScores, encoder_scores, judged_coverage
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import settings_key
from kiwb.project.instances import replace_instances
from kiwb.project.records import (
    IntegrationRecord,
    IntegrationSettings,
    IntegrationSummary,
    teacher_facts,
)
from kiwb.project.store import Store
from kiwb.workers.score_tasks import ScoreTask

MARGIN_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def run_embedding_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings,
                              tasks: list[ScoreTask]) -> IntegrationRecord:
    """Integrate an embedding project's pool; returns the integration as recorded."""
    section = config.embedding
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    pool = encoder_scores(config, store, by_role["unlabeled"])
    coverage, judged = judged_coverage(
        store, pool, pool.coverage(section.min_kept_share, section.min_known_share),
        settings.labels)
    console.print(f"Seeking conflicting pairs among {len(pool.texts):,} texts' nearest neighbours "
                  f"under {len(pool.teachers)} teachers", highlight=False, markup=False)
    pairs = conflicting_pairs(pool.embeddings, coverage, section.conflict_pairs)
    evaluation = None
    if by_role["eval"]:
        evaluation = eval_figures(config, encoder_scores(config, store, by_role["eval"]),
                                  by_role["eval"])
    summary = embedding_summary(pool, coverage, pairs, settings, evaluation, judged)
    key = integration_key(pool, settings, section, judged)
    store.record_integration(key, dataset="unlabeled", settings=settings.to_dict(),
                             summary=summary.to_dict())
    save_pairs(store, key, pool, pairs)
    return IntegrationRecord.from_dict(store.integration(key))


def integration_key(pool: EncoderScores, settings: IntegrationSettings, section,
                    judged: dict | None) -> str:
    """The integration's key: the score sets, the weighting, [embedding]'s coverage and
    conflict settings and the judgements given. A training run pins it: its targets are the
    teachers' embeddings under the coverage these same inputs decide."""
    return settings_key({"kind": KIND.name, "scores": pool.score_keys,
                         "weighting": settings.method, "min_kept_share": section.min_kept_share,
                         "min_known_share": section.min_known_share,
                         "conflict_pairs": section.conflict_pairs,
                         **({"given_labels": judged["fingerprint"]} if judged else {})})


def embedding_summary(pool: EncoderScores, coverage: torch.Tensor, pairs: list[PairConflict],
                      settings: IntegrationSettings, evaluation: dict | None,
                      judged: dict | None = None) -> IntegrationSummary:
    """The integration summary: per teacher what it covers and the texts it is the steadiest
    covering teacher on ("wins"); margins are 1 - each listed pair's disagreement (capped);
    its labels are the judgements a pair may be given."""
    reliable = torch.where(coverage > 0, pool.reliability(), torch.full_like(coverage, -1.0))
    covered = coverage.sum(0) > 0  # a text no teacher covers is nobody's
    wins = torch.bincount(reliable.argmax(0)[covered], minlength=len(pool.teachers))
    margins = np.asarray([1.0 - min(1.0, pair.disagreement) for pair in pairs] or [1.0])
    stability = 1.0 - pool.dispersion
    details = {"texts": len(pool.texts), "weighting": settings.method, "pairs": len(pairs)}
    own = {name: {"width": width, "coverage": float(share),
                  "dispersion_median": float(dispersion.median()),
                  "stability_histogram": stability_histogram(steadiness)}
           for name, width, share, dispersion, steadiness in zip(
               pool.teachers, pool.widths, coverage.mean(1).tolist(), pool.dispersion, stability,
               strict=True)}
    if evaluation is not None:
        details["eval"] = evaluation
    if judged is not None:
        details["judgements"] = {"pairs": judged["judged_pairs"],
                                 "places_taken": judged["places_taken"]}
    return IntegrationSummary(
        num_texts=len(pool.texts),
        per_teacher=teacher_facts(pool.teachers, pool.score_keys, wins.tolist(), own=own),
        labels=[SIMILAR, NOT_SIMILAR], overlapping_labels=[],
        margin_quantiles={str(q): float(np.quantile(margins, q)) for q in MARGIN_QUANTILES},
        margin_histogram=unit_histogram(margins),
        # every listed pair is a conflict: the threshold takes all but pairs one teacher alone
        # covers (no spread), which the Conflicts pane's margin filter then leaves out
        conflict_threshold=1.0, conflicts=int((margins < 1.0).sum()) if pairs else 0,
        teachers_kind=KIND.name, details=details)


def stability_histogram(stability: torch.Tensor) -> dict:
    """A teacher's stabilities (1 - dispersion) over the range they span: dropout moves an
    encoder's embedding little, so [0, 1] would put them all in one bin."""
    low = float(stability.min()) if len(stability) else 0.0
    high = max(float(stability.max()) if len(stability) else 1.0, low + 1e-6)
    counts = np.histogram(stability.numpy(), bins=BINS, range=(low, high))[0]
    return {"low": low, "high": high, "counts": counts.tolist()}


def eval_figures(config: ProjectConfig, scores: EncoderScores, tasks: list[ScoreTask]) -> dict:
    """The probes on the eval set for each teacher alone, their concatenation and their
    average: {row name: {probe: value}}."""
    labels = _label_ids(scores.labels) if scores.labels is not None else None
    partners = (partner_embeddings(config, tasks, scores.partners)
                if scores.partners is not None else None)
    rows = {}
    for number, name in enumerate(scores.teachers):
        rows[name] = probe_figures(scores.embeddings[number], labels,
                                   partners[number] if partners else None)
    for name, combine in (("concatenation", concatenated), ("average", averaged)):
        rows[name] = probe_figures(combine(scores.embeddings), labels,
                                   combine(partners) if partners else None)
    return {"texts": len(scores.texts), "rows": rows}


def _label_ids(labels: list[str]) -> torch.Tensor:
    index = {label: number for number, label in enumerate(dict.fromkeys(labels))}
    return torch.tensor([index[label] for label in labels])


def partner_embeddings(config: ProjectConfig, tasks: list[ScoreTask],
                       partners: list[str]) -> list[torch.Tensor]:
    """Each teacher's embeddings of the eval set's partner texts (dropout off): they are not
    scored, only probed, so each teacher reads them once here."""
    from kiwb.kinds.embedding.scoring import encode_texts
    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.teachers import load_teacher

    device = resolve_device(config.scoring.device)
    found = []
    for task in tasks:
        teacher = task.teacher
        console.print(f"{teacher.name}: embedding {len(partners):,} partner texts for the "
                      "retrieval probe", highlight=False, markup=False)
        model, tokenizer = load_teacher(teacher, str(device))
        length = min(config.scoring.max_length, teacher.reads_up_to or config.scoring.max_length)
        found.append(encode_texts(model, tokenizer, partners, teacher.pooling, length,
                                  config.scoring.batch_size, device))
        del model
    return found


def save_pairs(store: Store, key: str, pool: EncoderScores, pairs: list[PairConflict]) -> None:
    """One conflicts-list row per listed pair: both texts, each teacher's cosine, its margin
    (1 - the disagreement, capped), the teacher that finds the two closest, and as its class
    what the covering teachers' mean cosine leans to (similar from 0.5)."""
    rows = []
    for number, pair in enumerate(pairs):
        cosines = list(pair.cosines)
        closest = max(range(len(cosines)), key=lambda t: -2.0 if cosines[t] is None else cosines[t])
        texts = [pool.texts[pair.first], pool.texts[pair.second]]
        details = {"pair": [pair.first, pair.second], "texts": texts, "cosines": cosines,
                   "disagreement": pair.disagreement,
                   "scores": [0.0 if value is None else value for value in cosines]}
        known = [value for value in cosines if value is not None]
        leaning = 0 if sum(known) / len(known) >= 0.5 else 1  # what the teachers' mean says
        rows.append((number, 1.0 - min(1.0, pair.disagreement), closest, leaning, None, details,
                     PAIR_JOINER.join(texts)))
    replace_instances(store.connection, key, rows)
