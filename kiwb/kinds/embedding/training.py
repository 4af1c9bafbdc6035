"""`kiwb train` for sentence encoders: each pool text's target is every teacher's embedding of
it with whether the teacher covers it and how reliable it is there (the student's TargetLayout);
the eval set's labels and partner texts feed the probes; the manifest pins the inputs."""

from __future__ import annotations

import torch

from kiwb.errors import KiwbError
from kiwb.kinds.embedding import KIND
from kiwb.kinds.embedding.integrate_job import integration_key
from kiwb.kinds.embedding.stored_pool import encoder_scores, judged_coverage
from kiwb.kinds.embedding.student import EmbeddingStudent, TargetLayout
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.project.run_manifest import RunManifest
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.teachers import teacher_content_hash
from kiwb.workers.training_data import TrainingData


def prepare_embedding(config: ProjectConfig, store: Store, request,
                      tasks: list[ScoreTask]) -> TrainingData:
    """An embedding run's TrainingData."""
    settings, section = request.settings, config.embedding
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    if any(len(store.done_shards(t.key)) < t.num_shards for t in by_role["unlabeled"]):
        raise KiwbError("no complete teacher scores for the unlabeled data yet; run: "
                        + command("score", config.root))
    pool = encoder_scores(config, store, by_role["unlabeled"])
    coverage, judged = judged_coverage(
        store, pool, pool.coverage(section.min_kept_share, section.min_known_share),
        settings.labels)
    targets = TargetLayout(pool.widths).join(pool.embeddings, coverage, pool.reliability())
    eval_table = by_role["eval"][0].table if by_role["eval"] else None
    eval_labels = eval_partners = None
    if eval_table is not None:
        if eval_table.labels is not None:
            index = {label: i for i, label in enumerate(dict.fromkeys(eval_table.labels))}
            eval_labels = [index[label] for label in eval_table.labels]
        eval_partners = eval_table.partners
    student = EmbeddingStudent(pool.widths, section.pooling, section.direct_weight, eval_labels,
                               eval_partners, config.training.max_length)
    pool_table = by_role["unlabeled"][0].table
    manifest = RunManifest(
        kind=KIND.name,
        teachers=[{"name": t.teacher.name, "hash": teacher_content_hash(t.teacher, store),
                   "width": t.teacher.width, "pooling": t.teacher.pooling}
                  for t in by_role["unlabeled"]],
        labels=[], method=settings.pinned(), student=config.training.student,
        data=pool_table.fingerprint, given_labels=judged["fingerprint"] if judged else None,
        eval_data=({"texts": eval_table.fingerprint,
                    "labels": texts_fingerprint(eval_table.labels or []),
                    "partners": texts_fingerprint(eval_table.partners or [])}
                   if eval_table is not None else None),
        training=config.training.manifest(),
        own={"embedding": {"pooling": section.pooling, "direct_weight": section.direct_weight,
                           "min_kept_share": section.min_kept_share,
                           "min_known_share": section.min_known_share},
             # the integration of these inputs: its targets are the scored embeddings under
             # the coverage worked out above (nothing to read back: integrating adds only the
             # conflicts list and the eval probes, which training does not use)
             "integration": integration_key(pool, settings, section, judged)}).to_dict()
    return TrainingData(
        [], pool.texts, targets, torch.ones(len(pool.texts)), None, torch.zeros(0),
        eval_table.texts if eval_table is not None else None, None, None, manifest,
        student=student)
