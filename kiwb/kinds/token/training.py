"""`kiwb train` for token teachers: the word targets, the eval set and the manifest of a run."""

from __future__ import annotations

import torch

from kiwb.core.choices import SUPERVISED
from kiwb.errors import KiwbError
from kiwb.kinds.token import KIND
from kiwb.kinds.token.integrate_job import stored_token_integration
from kiwb.kinds.token.stored_pool import token_data
from kiwb.kinds.token.student import TokenStudent
from kiwb.kinds.token.targets import union_coverage
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.project.run_manifest import RunManifest
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.integration_targets import given_labels_fingerprint, pinned_integration
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.teachers import pinned_teachers
from kiwb.workers.training_data import TrainingData


def prepare_token(config: ProjectConfig, store: Store, request, tasks: list[ScoreTask]):
    """A token run's TrainingData: word targets of the integrated pool (or, supervised, its
    gold tags), the eval set's words and tags, and the manifest that pins its inputs."""
    settings = request.settings
    by_role = {role: [t for t in tasks if t.dataset == role] for role in ("unlabeled", "eval")}
    pool_table = by_role["unlabeled"][0].table
    if any(len(store.done_shards(t.key)) < t.num_shards for t in by_role["unlabeled"]):
        raise KiwbError("no complete teacher scores for the unlabeled data yet; run: "
                        + command("score", config.root))
    data = token_data(config, store, by_role["unlabeled"])
    union = list(data.scores.union)
    eval_finished = bool(by_role["eval"]) and all(
        len(store.done_shards(t.key)) == t.num_shards for t in by_role["eval"])
    evaluation = token_data(config, store, by_role["eval"]) if eval_finished else None
    targets = weights = label_ids = record = given_labels = None
    if settings.method == SUPERVISED:
        label_ids = _gold_ids(pool_table, union, config)
    else:  # the word targets kiwb integrate kept, read by the integration's key
        given_labels = given_labels_fingerprint(store, settings)
        record, stored = stored_token_integration(
            config, store, settings, data, evaluation,
            eval_unfinished=bool(by_role["eval"]) and not eval_finished, given_labels=given_labels)
        targets, weights = stored["targets"], stored["weights"]
    eval_reference = eval_routing = None
    if evaluation is not None and record is not None and record.summary.eval is not None:
        eval_routing = record.summary.eval.routing_accuracy.to_dict()
    eval_table = by_role["eval"][0].table if by_role["eval"] else None
    student = TokenStudent(data.types, pool_table.words, eval_table.words if eval_table else None,
                           eval_table.tags if eval_table else None, config.training.max_length)
    manifest = RunManifest(
        kind=KIND.name,
        teachers=pinned_teachers(by_role["unlabeled"], store),
        labels=union, method=settings.pinned(), student=config.training.student,
        data=pool_table.fingerprint,
        given_labels=given_labels,
        eval_data=({"texts": eval_table.fingerprint,
                    "labels": texts_fingerprint(["\x1f".join(t) for t in eval_table.tags])}
                   if eval_table is not None else None),
        training=config.training.manifest(),
        own=pinned_integration(record)).to_dict()
    return TrainingData(
        union, pool_table.texts, targets, weights, label_ids,
        union_coverage(data.tag_sets, union), eval_table.texts if eval_table else None, None,
        eval_routing, manifest, student=student, eval_reference=eval_reference)


def _gold_ids(table, union: list[str], config: ProjectConfig) -> torch.Tensor:
    """The pool's gold tags as union ids, word by word (the supervised run)."""
    if table.tags is None:
        raise KiwbError(f"{config.file}: the supervised run needs the pool's gold tags; set "
                        "tags_column in [data.unlabeled]")
    index = {tag: i for i, tag in enumerate(union)}
    unknown = sorted({tag for tags in table.tags for tag in tags if tag not in index})
    if unknown:
        raise KiwbError(f"gold tags {', '.join(unknown[:5])} name types no teacher knows "
                        f"({', '.join(union)}); fix the tags column")
    return torch.tensor([index[tag] for tags in table.tags for tag in tags])
