"""A sequence student's training data (the sequence kind's runtime `prepare_training`): per-text
targets from the integration, or the gold labels (supervised), the eval set with its untrained
references, and the manifest that pins the run's inputs."""

from __future__ import annotations

import torch

from kiwb.core.choices import SUPERVISED
from kiwb.errors import KiwbError
from kiwb.kinds.sequence import KIND
from kiwb.kinds.sequence.integration import (
    TeacherScores,
    class_funnel_of,
    ensemble_reference,
    gold_labels,
    integrate_pool,
    labeled_file_scores,
    labeled_scores_for_choice,
    labeled_targets,
    reference_text,
    routing_accuracies,
    routing_check,
    scores_from_tasks,
    without_given_labels,
)
from kiwb.kinds.sequence.routing_choice import is_auto, pick_routing, reads_representation
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.project.config import ProjectConfig
from kiwb.project.config_schema import DATASET_ROLES
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.project.records import RoutingAccuracy
from kiwb.project.run_manifest import RunManifest
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.representation_sets import seen_references
from kiwb.workers.teachers import pinned_teachers
from kiwb.workers.training_data import TrainingData, TrainRequest


def prepare_texts(config: ProjectConfig, store: Store, request: TrainRequest,
                  tasks: list) -> TrainingData:
    """The sequence kind's prepare_training: per-text targets, the eval set, the manifest."""
    by_dataset = {d: [t for t in tasks if t.dataset == d] for d in DATASET_ROLES}
    settings = request.settings
    method = settings.method
    distilled = method != SUPERVISED
    reads = distilled and reads_representation(settings, store, tasks)
    scores = _scores_or_hint(config, store, by_dataset["unlabeled"], need=distilled,
                             representation=reads)
    seen, seen_keys = (seen_references(config, store, [t.teacher for t in by_dataset["unlabeled"]])
                       if reads else (None, {}))
    from kiwb.core.labels import coverage_mask, gold_label_ids, union_labels

    label_sets = [t.teacher.labels for t in by_dataset["unlabeled"]]
    labels = union_labels(label_sets)
    unlabeled_table = by_dataset["unlabeled"][0].table
    texts = unlabeled_table.texts
    targets = weights = label_ids = fitted = labeled_fingerprint = gold = pool = choice = None
    if method == SUPERVISED:
        if unlabeled_table.labels is None:
            raise KiwbError(f"{config.file}: the supervised run needs gold labels; set "
                            "label_column in [data.unlabeled]")
        label_ids = gold_label_ids(unlabeled_table.labels, labels)
    else:
        labeled = labeled_file_scores(config, store, settings, by_dataset["labeled"])
        if labeled is not None:
            labeled_texts = by_dataset["labeled"][0].table
            labeled_fingerprint = labeled_data_fingerprint(labeled_texts)
        # "auto" chooses as the integration did: on the same scores and labeled texts
        given = gold_labels(store, texts, scores.labels) if settings.labels else None
        eval_for_choice = None
        if is_auto(settings) and by_dataset["eval"]:
            eval_for_choice = without_given_labels(
                scores_from_tasks(config, store, by_dataset["eval"], reads),
                by_dataset["eval"][0].table.texts, given)[0]
        settings, choice = pick_routing(
            settings, scores, eval_for_choice,
            labeled_scores_for_choice(config, store, settings, by_dataset, reads), given, seen,
            reads)
        pool = integrate_pool(settings, store, scores, texts, labeled, seen)
        fitted, gold = pool.fitted, pool.gold
        targets, weights = pool.result.targets, pool.result.weights
        if gold is not None and len(gold.left_out):  # none of these labels: not trained on
            keep = weights.new_ones(len(texts), dtype=torch.bool)
            keep[gold.left_out] = False
            texts = [text for text, kept in zip(texts, keep.tolist(), strict=True) if kept]
            targets, weights = targets[keep], weights[keep]
        if labeled is not None:  # the few labels of [data.labeled] also teach, at full weight
            texts = texts + labeled_texts.texts
            extra_targets, extra_weights = labeled_targets(labeled, method)
            targets, weights = torch.cat([targets, extra_targets]), torch.cat([weights, extra_weights])
    eval_texts = eval_ids = eval_routing = eval_fingerprint = eval_reference = eval_scores = None
    if by_dataset["eval"]:
        eval_table = by_dataset["eval"][0].table
        eval_texts, eval_ids = eval_table.texts, gold_label_ids(eval_table.labels, labels)
        # The gold labels decide the figures and the best checkpoint as much as the texts do.
        eval_fingerprint = labeled_data_fingerprint(eval_table)
        eval_scores = _scores_or_hint(config, store, by_dataset["eval"], need=False,
                                      representation=reads)
        if gold is not None:  # texts the student was taught the label of are not a test
            keep = gold.undecided(eval_texts)
            eval_texts, eval_ids = [eval_texts[i] for i in keep.tolist()], eval_ids[keep]
            if eval_scores is not None:
                eval_scores = eval_scores.rows(keep)
        if eval_scores is not None:
            eval_routing = routing_accuracies(eval_scores, eval_ids, fitted)
            eval_reference = ensemble_reference(eval_scores)
    check = funnel = None  # the integration's routing, checked as `kiwb integrate` checks it
    if pool is not None:
        check = routing_check(scores, pool, settings, eval_routing and RoutingAccuracy(**eval_routing),
                              len(eval_ids) if eval_ids is not None else 0)
        funnel = class_funnel_of(scores, pool, settings, eval_scores)
    own = {"routing_check": check.to_dict() if check is not None else None,
           "class_funnel": funnel.to_dict() if funnel is not None else None}
    if choice is not None:  # routing = "auto": what it chose, and from what
        own["routing_choice"] = choice.to_dict()
    if reads:  # the representations (and seen texts) decide the routing as the scores do
        own["representations"] = {
            "sets": [t.representation.key for t in by_dataset["unlabeled"]], "seen": seen_keys,
            "references": {name: reference_text(router) for name, router
                           in zip(scores.teachers, fitted.routers, strict=True)}}
    manifest = RunManifest(
        kind=KIND.name,
        teachers=pinned_teachers(by_dataset["unlabeled"], store),
        labels=labels, method=request.settings.pinned(), student=config.training.student,
        data=unlabeled_table.fingerprint, labeled_data=labeled_fingerprint,
        given_labels=gold.fingerprint if gold is not None else None, eval_data=eval_fingerprint,
        training=config.training.manifest(), own=own).to_dict()
    return TrainingData(labels, texts, targets, weights, label_ids,
                        coverage_mask(label_sets, labels), eval_texts, eval_ids, eval_routing,
                        manifest, student=SequenceStudent(), eval_reference=eval_reference)


def labeled_data_fingerprint(table) -> dict:
    """The texts' and the gold labels' fingerprints: either changing changes the run."""
    return {"texts": table.fingerprint, "labels": texts_fingerprint(table.labels)}


def _scores_or_hint(config, store, tasks, need: bool,
                    representation: bool = False) -> TeacherScores | None:
    incomplete = [t for t in tasks if len(store.done_shards(t.key)) < t.num_shards]
    if not incomplete:
        return scores_from_tasks(config, store, tasks, representation)
    if need:
        raise KiwbError("no complete teacher scores for the unlabeled data yet; run: "
                        + command("score", config.root))
    return None
