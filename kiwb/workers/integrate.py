"""`kiwb integrate`: turn stored scores into training targets and summarise them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from kiwb.core import integration as integ
from kiwb.core.labels import coverage_mask, label_positions, overlapping_labels, union_labels
from kiwb.errors import DataError
from kiwb.project.config import ProjectConfig
from kiwb.project.fingerprint import settings_key
from kiwb.project.store import Store
from kiwb.workers.score import ScoreTask, load_scores, plan_scoring

MARGIN_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
HISTOGRAM_BINS = 20


@dataclass(frozen=True)
class IntegrationSettings:
    """The choices that turn scores into targets; changing them never rescores."""

    method: str = "muki-hard"
    tau: float = 0.2
    reweight: bool = True
    use_mc: bool = True
    conflict_threshold: float = 0.1

    @classmethod
    def from_config(cls, config: ProjectConfig, **overrides) -> IntegrationSettings:
        section = config.integration
        values = {
            "method": section.method, "tau": section.tau, "reweight": section.reweight,
            "use_mc": section.use_mc, "conflict_threshold": section.conflict_threshold,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass
class TeacherScores:
    """Scores of all teachers on one data set, as tensors, plus the union-label mapping."""

    teachers: list[str]
    teacher_labels: list[tuple[str, ...]]
    labels: list[str]
    positions: list[torch.Tensor]
    coverage: torch.Tensor
    mc_confidence: torch.Tensor   # (n, N)
    det_confidence: torch.Tensor  # (n, N)
    det_probs: list[torch.Tensor]
    det_logits: list[torch.Tensor]
    mc_probs: list[torch.Tensor]
    true_labels: list[str] | None = None
    score_keys: list[str] = field(default_factory=list)

    def true_label_ids(self) -> torch.Tensor | None:
        """The true labels as union indices, refusing labels no teacher knows."""
        if self.true_labels is None:
            return None
        index = {label: i for i, label in enumerate(self.labels)}
        unknown = sorted({label for label in self.true_labels if label not in index})
        if unknown:
            raise DataError(
                f"labels {', '.join(map(repr, unknown[:5]))} of the labeled data are in no "
                f"teacher's label set ({', '.join(self.labels)}); fix the label column"
            )
        return torch.tensor([index[label] for label in self.true_labels])

    def integrate(self, settings: IntegrationSettings) -> integ.Integration:
        return integ.integrate(
            settings.method, mc_confidences=self.mc_confidence,
            det_confidences=self.det_confidence, det_probs=self.det_probs,
            det_logits=self.det_logits, positions=self.positions, num_union=len(self.labels),
            tau=settings.tau, reweight=settings.reweight, use_mc=settings.use_mc,
        )


def scores_from_tasks(config: ProjectConfig, store: Store, tasks: list[ScoreTask]) -> TeacherScores:
    arrays = [load_scores(config, store, task) for task in tasks]
    label_sets = [task.teacher.labels for task in tasks]
    labels = union_labels(label_sets)

    def stack(name: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([a[name] for a in arrays], axis=1))  # (n, N)

    return TeacherScores(
        teachers=[task.teacher.name for task in tasks], teacher_labels=label_sets,
        labels=labels, positions=label_positions(label_sets, labels),
        coverage=coverage_mask(label_sets, labels),
        mc_confidence=stack("mc_confidence"), det_confidence=stack("det_confidence"),
        det_probs=[torch.from_numpy(a["det_probs"]) for a in arrays],
        det_logits=[torch.from_numpy(a["det_logits"]) for a in arrays],
        mc_probs=[torch.from_numpy(a["mc_probs"]) for a in arrays],
        true_labels=tasks[0].table.labels, score_keys=[task.key for task in tasks],
    )


def summarize(scores: TeacherScores, result: integ.Integration, threshold: float) -> dict:
    """Counts per winning teacher, the margin distribution and the conflicting texts."""
    margin = result.margin.numpy()
    wins = torch.bincount(result.routed, minlength=len(scores.teachers)).tolist()
    counts, _ = np.histogram(margin, bins=HISTOGRAM_BINS, range=(0.0, 1.0))
    summary = {
        "num_texts": int(margin.shape[0]),
        "teachers": scores.teachers,
        "score_keys": dict(zip(scores.teachers, scores.score_keys, strict=True)),
        "labels": scores.labels,
        "overlapping_labels": overlapping_labels(scores.teacher_labels),
        "wins": dict(zip(scores.teachers, wins, strict=True)),
        "margin_quantiles": {str(q): float(np.quantile(margin, q)) for q in MARGIN_QUANTILES},
        "margin_histogram": counts.tolist(),
        "conflict_threshold": threshold,
        "conflicts": int((margin < threshold).sum()),
    }
    true_ids = scores.true_label_ids()
    if true_ids is not None:
        summary["routing_accuracy"] = routing_accuracies(scores, true_ids)
        summary["teacher_accuracy"] = teacher_accuracies(scores, true_ids)
        summary["ensemble_accuracy"] = ensemble_accuracy(scores)
    return summary


def teacher_accuracies(scores: TeacherScores, true_ids: torch.Tensor) -> dict[str, float]:
    """Each teacher alone over the union labels (it can only be right on its own labels)."""
    return {
        name: float((scores.positions[i][probs.argmax(-1)] == true_ids).float().mean())
        for i, (name, probs) in enumerate(zip(scores.teachers, scores.det_probs, strict=True))
    }


def routing_accuracies(scores: TeacherScores, true_ids: torch.Tensor) -> dict[str, float]:
    """How often the most confident teacher knows the true label: MC vs plain entropy."""
    return {
        "mc_dropout": integ.routing_accuracy(scores.mc_confidence, true_ids, scores.coverage),
        "plain_entropy": integ.routing_accuracy(scores.det_confidence, true_ids, scores.coverage),
    }


def confidence_histograms(scores: TeacherScores) -> dict[str, dict[str, list[int]]]:
    """The paper's figure 2: confidence of the right vs the wrong teacher, MC vs plain entropy.

    A teacher is "right" for a text when its label set holds the text's gold label.
    """
    true_ids = scores.true_label_ids()
    covers = scores.coverage[:, true_ids].T  # (n, N): teacher i knows text x's gold label
    result = {}
    for name, confidences in (("mc_dropout", scores.mc_confidence), ("plain_entropy", scores.det_confidence)):
        result[name] = {
            side: np.histogram(confidences[mask].numpy(), bins=HISTOGRAM_BINS, range=(0.0, 1.0))[0].tolist()
            for side, mask in (("right_teacher", covers), ("wrong_teacher", ~covers))
        }
    return result


def ensemble_accuracy(scores: TeacherScores) -> float | None:
    """Accuracy of the untrained Ensemble baseline (softmax over concatenated logits)."""
    true_ids = scores.true_label_ids()
    if true_ids is None:
        return None
    probs = integ.concatenated_logit_probs(scores.det_logits, scores.positions, len(scores.labels))
    return float((probs.argmax(-1) == true_ids).float().mean())


def save_instances(store: Store, key: str, scores: TeacherScores, result: integ.Integration,
                   texts: list[str]) -> None:
    """One row per text for the conflicts list: margin, winner, target class, confidences."""
    from kiwb.project.instances import replace_instances

    target_ids = result.targets if result.targets.dim() == 2 else result.targets.sum(1)
    target_ids = target_ids.argmax(-1).tolist()
    true_ids = scores.true_label_ids()
    gold = true_ids.tolist() if true_ids is not None else [None] * len(texts)
    confidences = result.confidences.tolist()
    rows = zip(range(len(texts)), result.margin.tolist(), result.routed.tolist(), target_ids,
               gold, confidences, texts, strict=True)
    replace_instances(store.connection, key, rows)


def run_integration(config: ProjectConfig, store: Store, settings: IntegrationSettings) -> dict:
    """Integrate the unlabeled scores with `settings`, record and return the summary."""
    tasks = plan_scoring(config, store)  # loads the data and checks the teachers once
    unlabeled = [task for task in tasks if task.dataset == "unlabeled"]
    eval_tasks = [task for task in tasks if task.dataset == "eval"]
    scores = scores_from_tasks(config, store, unlabeled)
    result = scores.integrate(settings)
    summary = summarize(scores, result, settings.conflict_threshold)
    if eval_tasks:
        eval_scores = scores_from_tasks(config, store, eval_tasks)
        summary["eval"] = {
            "num_texts": len(eval_scores.true_labels or []),
            "routing_accuracy": routing_accuracies(eval_scores, eval_scores.true_label_ids()),
            "ensemble_accuracy": ensemble_accuracy(eval_scores),
            "teacher_accuracy": teacher_accuracies(eval_scores, eval_scores.true_label_ids()),
            "confidence_histograms": confidence_histograms(eval_scores),
        }
    key = settings_key({"scores": scores.score_keys, **asdict(settings)})
    texts = unlabeled[0].table.texts
    store.record_integration(key, dataset="unlabeled", settings=asdict(settings), summary=summary)
    save_instances(store, key, scores, result, texts)
    summary["key"] = key
    return summary
