"""A sequence student's training data (the sequence kind's runtime `prepare_training`): per-text
targets read from the stored integration by its key (kiwb.workers.integration_targets), or the
gold labels (supervised), the eval set with its untrained references, and the manifest that
pins the run's inputs, the integration's key among them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kiwb.core.choices import SUPERVISED
from kiwb.errors import KiwbError
from kiwb.kinds.sequence import KIND
from kiwb.kinds.sequence.integration import (
    GoldLabels,
    IntegrationInputs,
    TeacherScores,
    ensemble_reference,
    routing_accuracies,
    scores_from_tasks,
    stored_integration,
)
from kiwb.kinds.sequence.routing_choice import is_auto
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.project.config import ProjectConfig
from kiwb.project.config_schema import DATASET_ROLES
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.project.records import IntegrationRecord
from kiwb.project.run_manifest import RunManifest
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.integration_targets import pinned_integration
from kiwb.workers.teachers import pinned_teachers
from kiwb.workers.training_data import TrainingData, TrainRequest


def prepare_texts(config: ProjectConfig, store: Store, request: TrainRequest,
                  tasks: list) -> TrainingData:
    """The sequence kind's prepare_training: per-text targets (the stored integration's, read
    by its key, or the gold labels for a supervised run), the eval set, the manifest."""
    from kiwb.core.labels import coverage_mask, gold_label_ids, union_labels

    by_dataset = {d: [t for t in tasks if t.dataset == d] for d in DATASET_ROLES}
    settings = request.settings
    label_sets = [t.teacher.labels for t in by_dataset["unlabeled"]]
    labels = union_labels(label_sets)
    unlabeled_table = by_dataset["unlabeled"][0].table
    if settings.method == SUPERVISED:
        if unlabeled_table.labels is None:
            raise KiwbError(f"{config.file}: the supervised run needs gold labels; set "
                            "label_column in [data.unlabeled]")
        taught = Taught(texts=unlabeled_table.texts, targets=None, weights=None,
                        label_ids=gold_label_ids(unlabeled_table.labels, labels))
        eval_scores = (_scores_or_none(config, store, by_dataset["eval"])
                       if by_dataset["eval"] else None)
    else:
        taught = integrated(config, store, settings, by_dataset)
        eval_scores = taught.inputs.eval_scores
    eval_texts = eval_ids = eval_routing = eval_fingerprint = eval_reference = None
    if by_dataset["eval"]:
        eval_table = by_dataset["eval"][0].table
        eval_texts, eval_ids = eval_table.texts, gold_label_ids(eval_table.labels, labels)
        # The gold labels decide the figures and the best checkpoint as much as the texts do.
        eval_fingerprint = labeled_data_fingerprint(eval_table)
        if taught.gold is not None:  # texts the student was taught the label of are not a test
            keep = taught.gold.undecided(eval_texts)
            eval_texts, eval_ids = [eval_texts[i] for i in keep.tolist()], eval_ids[keep]
        if eval_scores is not None:
            evaluation = taught.record.summary.eval if taught.record is not None else None
            eval_routing = (evaluation.routing_accuracy.to_dict() if evaluation is not None
                            else routing_accuracies(eval_scores, eval_ids))
            eval_reference = ensemble_reference(eval_scores)
    manifest = RunManifest(
        kind=KIND.name,
        teachers=pinned_teachers(by_dataset["unlabeled"], store),
        labels=labels, method=request.settings.pinned(), student=config.training.student,
        data=unlabeled_table.fingerprint, labeled_data=taught.labeled_fingerprint,
        given_labels=taught.gold.fingerprint if taught.gold is not None else None,
        eval_data=eval_fingerprint, training=config.training.manifest(),
        own=taught.pinned()).to_dict()
    return TrainingData(labels, taught.texts, taught.targets, taught.weights, taught.label_ids,
                        coverage_mask(label_sets, labels), eval_texts, eval_ids, eval_routing,
                        manifest, student=SequenceStudent(), eval_reference=eval_reference)


@dataclass
class Taught:
    """What a run learns from: its texts with their targets and weights (or gold label ids for
    a supervised run), and the stored integration they were read from."""

    texts: list[str]
    targets: torch.Tensor | None
    weights: torch.Tensor | None
    label_ids: torch.Tensor | None
    record: IntegrationRecord | None = None
    inputs: IntegrationInputs | None = None
    labeled_fingerprint: dict | None = None  # [data.labeled]'s, where it teaches

    @property
    def gold(self) -> GoldLabels | None:
        return self.inputs.gold if self.inputs is not None else None

    def pinned(self) -> dict:
        """The manifest's own entries: the integration read (by key), its routing's check,
        class funnel and choice, and the representations it read."""
        own = pinned_integration(self.record)
        if self.record is not None and self.inputs.reads:  # the representations (and seen
            # texts) decide the routing too
            own["representations"] = {
                "sets": self.inputs.representation_keys, "seen": self.inputs.seen_keys,
                "references": {facts.name: facts.routing.reference
                               for facts in self.record.summary.per_teacher
                               if facts.routing is not None}}
        return own


def integrated(config: ProjectConfig, store: Store, settings, by_dataset: dict) -> Taught:
    """A distilled run's texts and targets: the stored integration's for these inputs (made now
    where none is recorded), less the texts marked none of these labels, plus [data.labeled]'s
    texts at full weight."""
    # An eval set not yet scored is no reason to wait (its figures come without references),
    # unless "auto" chooses the routing on it, as kiwb integrate would.
    eval_tasks = by_dataset["eval"]
    eval_unfinished = not is_auto(settings) and _unfinished(store, eval_tasks)
    if eval_unfinished:
        eval_tasks = []
    unlabeled = by_dataset["unlabeled"]
    if _unfinished(store, unlabeled):
        raise KiwbError("no complete teacher scores for the unlabeled data yet; run: "
                        + command("score", config.root))
    record, inputs, stored = stored_integration(
        config, store, settings, [*unlabeled, *by_dataset["labeled"], *eval_tasks],
        eval_unfinished)
    texts, targets, weights = inputs.texts, stored["targets"], stored["weights"]
    gold = inputs.gold
    if gold is not None and len(gold.left_out):  # none of these labels: not trained on
        keep = weights.new_ones(len(texts), dtype=torch.bool)
        keep[gold.left_out] = False
        texts = [text for text, kept in zip(texts, keep.tolist(), strict=True) if kept]
        targets, weights = targets[keep], weights[keep]
    labeled_fingerprint = None
    if "labeled_targets" in stored:  # the few labels of [data.labeled] also teach, at full weight
        labeled_table = by_dataset["labeled"][0].table
        labeled_fingerprint = labeled_data_fingerprint(labeled_table)
        texts = texts + labeled_table.texts
        targets = torch.cat([targets, stored["labeled_targets"]])
        weights = torch.cat([weights, stored["labeled_weights"]])
    return Taught(texts=texts, targets=targets, weights=weights, label_ids=None, record=record,
                  inputs=inputs, labeled_fingerprint=labeled_fingerprint)


def labeled_data_fingerprint(table) -> dict:
    """The texts' and the gold labels' fingerprints: either changing changes the run."""
    return {"texts": table.fingerprint, "labels": texts_fingerprint(table.labels)}


def _scores_or_none(config, store, tasks) -> TeacherScores | None:
    """The tasks' stored scores, or None where some are not finished."""
    return scores_from_tasks(config, store, tasks) if not _unfinished(store, tasks) else None


def _unfinished(store: Store, tasks: list) -> bool:
    """Whether some of the tasks' score sets are not finished."""
    return any(len(store.done_shards(t.key)) < t.num_shards for t in tasks)
