"""The student of a multi-label project: a sequence classifier whose head says yes or no per
label (sigmoid), trained with binary cross-entropy per (text, label).

Texts are read, batched and passed through the model as a single-label student's are
(kiwb.workers.student); what differs is the head's problem_type, the losses, the gold labels'
shape ((n, L) 0/1 rather than (n,) ids) and the metrics."""

from __future__ import annotations

import torch

from kiwb.console import one_line
from kiwb.core.learning_check import LearningCheck, versus_reference
from kiwb.core.target_fit import decisive_yes, thresholded_fit
from kiwb.core.training_defaults import SIGMOID_STEPS_FACTOR, label_exposure_steps
from kiwb.errors import KiwbError
from kiwb.kinds.multilabel.check import OWNERS_MEAN, TARGET_RATE_FLOOR, check_label_rates
from kiwb.kinds.multilabel.losses import gold_bce_loss, weighted_bce_loss
from kiwb.kinds.multilabel.metrics import multilabel_report
from kiwb.kinds.multilabel.thresholds import DEFAULT_THRESHOLD, decide, tune_thresholds
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.workers.runtime import FittedBatch, load_classifier
from kiwb.workers.student import load_student_base, predict_logits, tokenize

PROBLEM_TYPE = "multi_label_classification"


def multi_hot(label_sets: list[tuple[str, ...]], labels: list[str]) -> torch.Tensor:
    """(n, L) 0/1 gold from each text's labels; every label must be one of `labels`."""
    index = {label: i for i, label in enumerate(labels)}
    gold = torch.zeros(len(label_sets), len(labels))
    for row, found in enumerate(label_sets):
        gold[row, [index[label] for label in found]] = 1.0
    return gold


@torch.no_grad()
def set_head_bias(model, bias: torch.Tensor) -> None:
    """Start the classifier's output layer (the last linear layer giving one value per label:
    `classifier` in BERT, `classifier.out_proj` in RoBERTa) at `bias`."""
    outputs = [module for module in model.modules() if isinstance(module, torch.nn.Linear)
               and module.out_features == model.config.num_labels and module.bias is not None]
    if not outputs:
        raise KiwbError(f"student base {model.config.name_or_path}: no output layer of "
                        f"{model.config.num_labels} labels with a bias to start from the labels' "
                        "priors; choose an encoder checkpoint such as BERT, RoBERTa or MiniLM")
    outputs[-1].bias.copy_(bias.to(outputs[-1].bias))


def predict_probs(model, tokenizer, features, batch_size: int | FittedBatch,
                  device: torch.device, autocast_dtype: str = "float32") -> torch.Tensor:
    """(n, L) sigmoid probabilities of every feature row, in input order."""
    return predict_logits(model, tokenizer, features, batch_size, device, autocast_dtype).sigmoid()


class MultiLabelStudent(SequenceStudent):
    """What the Trainer asks of a multi-label student (see SequenceStudent)."""

    kind = "multi-label"
    supervised_loss = staticmethod(gold_bce_loss)
    distillation_loss = staticmethod(weighted_bce_loss)

    def __init__(self, thresholds: list[float] | None = None, head_bias: torch.Tensor | None = None):
        self.thresholds = thresholds  # per label; None: 0.5 for every label
        self.head_bias = head_bias  # per label, the new head's starting bias (prior_log_odds)

    def load_base(self, base: str, labels: list[str]):
        model, tokenizer = load_student_base(base, labels)
        # Saved with the model, so an export loads as multi-label and the pipeline applies
        # a sigmoid per label.
        model.config.problem_type = PROBLEM_TYPE
        if self.head_bias is not None:
            set_head_bias(model, self.head_bias)
        return model, tokenizer

    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        """Micro F1 at 0.5 (the headline, under "accuracy", which picks the best checkpoint),
        macro F1, F1 per label (under "per_class_accuracy", for the panes), Hamming loss and
        subset accuracy; and per-label thresholds tuned on these labeled texts, saved in the
        model's config (label_thresholds) so the checkpoint, its export, `kiwb evaluate` and
        `kiwb predict` decide with them."""
        probs = predict_probs(model, tokenizer, features, batch, device, autocast_dtype)
        thresholds = (torch.tensor(self.thresholds) if self.thresholds is not None
                      else DEFAULT_THRESHOLD)
        decided = decide(probs, thresholds)
        report = multilabel_report(data.eval_ids, decided, data.labels)
        tuned = tune_thresholds(probs, data.eval_ids)
        model.config.label_thresholds = dict(zip(data.labels, tuned.tolist(), strict=True))
        tuned_report = multilabel_report(data.eval_ids, decide(probs, tuned), data.labels)
        counts = decided.sum(0).tolist()
        details = {name: report[name] for name in ("micro_f1", "hamming_loss", "subset_accuracy",
                                                   "support")}
        details.update(predicted_counts=dict(zip(data.labels, counts, strict=True)),
                       thresholds=model.config.label_thresholds,
                       tuned_micro_f1=tuned_report["micro_f1"],
                       tuned_macro_f1=tuned_report["macro_f1"])
        return {"accuracy": report["micro_f1"], "macro_f1": report["macro_f1"],
                "per_class_accuracy": report["per_label_f1"], "confusion": [],
                "num_texts": len(data.eval_ids), "details": details,
                "predicted_counts": counts}

    def fit(self, model, tokenizer, features, data, rows, batch, device, autocast_dtype) -> dict:
        """The micro F1 of the student's yes per (text, label) at 0.5 on the pool rows `rows`
        against their targets' (the gold labels, supervised). {"fit": micro F1}."""
        probs = predict_probs(model, tokenizer, [features[int(row)] for row in rows], batch,
                              device, autocast_dtype)
        taught = data.label_ids if data.label_ids is not None else data.targets
        return {"fit": thresholded_fit(probs, taught[rows])}

    def min_steps(self, data, batch_size: int, configured: int) -> tuple[int, str]:
        """Raised until the rarest label its targets say yes to is seen often enough as a yes
        (kiwb.core.training_defaults.label_exposure_steps)."""
        yes_rates = _yes_shares(data, lambda taught: taught > DEFAULT_THRESHOLD)
        return exposure_minimum(yes_rates.tolist(), data.labels, batch_size, configured)

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        """How many texts the student gives each label."""
        probs = predict_probs(model, tokenizer, features, batch, device, autocast_dtype)
        return decide(probs).sum(0).tolist()

    def target_shares(self, data) -> torch.Tensor:
        """Per label, the share of taught texts whose target decidedly says yes (0.6 or more:
        kiwb.core.target_fit.decisive_yes; gold, supervised)."""
        return _yes_shares(data, decisive_yes)

    def eval_check(self, data, metrics: dict, target_shares: list[float]) -> LearningCheck:
        """A label the targets give often that the student predicts on no eval text; else
        micro F1 under the owners' mean (the untrained reference of this kind)."""
        check = check_label_rates(data.labels, metrics["predicted_counts"], len(data.eval_texts),
                                  target_shares, "eval texts")
        if check.flagged:
            return check
        return versus_reference(metrics["accuracy"], (data.eval_reference or {}).get("accuracy"),
                                OWNERS_MEAN, metric="micro F1")

    def pool_check(self, data, predicted_counts: list[int],
                   target_shares: list[float]) -> LearningCheck:
        return check_label_rates(data.labels, predicted_counts, None, target_shares, "pool texts")


def _yes_shares(data, says_yes) -> torch.Tensor:
    """Per label, the share of taught texts (targets, or gold labels supervised) that
    `says_yes` counts as a yes; zeros without texts."""
    taught = data.label_ids if data.label_ids is not None else data.targets
    return says_yes(taught).float().mean(0) if len(taught) else taught.sum(0)


def exposure_minimum(yes_rates: list[float], names: list[str], batch_size: int,
                     configured: int) -> tuple[int, str]:
    """label_exposure_steps, with why, in words, it raises `configured`."""
    steps, rarest = label_exposure_steps(yes_rates, batch_size, configured, TARGET_RATE_FLOOR)
    if steps <= configured:
        return configured, ""
    why = (f"a sigmoid head learns each of its {len(names)} outputs as its own yes or no, "
           f"which takes {SIGMOID_STEPS_FACTOR}x min_steps")
    if rarest is not None:
        why += (f", and more for its rarest, {names[rarest]} (yes on "
                f"{100 * yes_rates[rarest]:.1f}% of the texts), to be seen as a yes about "
                f"{round(steps * batch_size * yes_rates[rarest]):,} times")
    return steps, why


def _load(folder):
    from transformers import AutoTokenizer

    model = load_classifier(folder, kind="multi-label")
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    return model, AutoTokenizer.from_pretrained(folder), labels


def saved_thresholds(model, labels: list[str]) -> torch.Tensor:
    """(L,) the label_thresholds a student's config holds (tuned on its eval set), 0.5 for a
    label without one."""
    found = getattr(model.config, "label_thresholds", None) or {}
    return torch.tensor([float(found.get(label, DEFAULT_THRESHOLD)) for label in labels])


def evaluate_classifier(checkpoint, table, device: torch.device, batch_size: int,
                        max_length: int) -> dict:
    """The multi-label kind's evaluate: micro F1 (the headline, in `accuracy`), macro
    F1, F1 per label, Hamming loss and subset accuracy on a table of texts and label sets,
    decided at the student's saved thresholds."""
    if table.label_sets is None:
        raise KiwbError(f"{table.source}: evaluating a multi-label student needs each text's "
                        'labels: set label_column (a list per row, or a string with label_separator)')
    model, tokenizer, labels = _load(checkpoint)
    known = set(labels)
    unknown = sorted({label for found in table.label_sets for label in found} - known)
    if unknown:
        raise KiwbError(f"{table.source}: labels {', '.join(unknown[:5])} are not among the "
                        f"student's labels ({', '.join(labels)})")
    model.to(device)
    features = tokenize(tokenizer, table.texts, max_length)
    probs = predict_probs(model, tokenizer, features, FittedBatch(batch_size), device)
    thresholds = saved_thresholds(model, labels)
    gold = multi_hot(table.label_sets, labels)
    report = multilabel_report(gold, decide(probs, thresholds), labels)
    # Beside them, the figures at 0.5: on the texts the thresholds were tuned on (the project's
    # eval set) the saved thresholds flatter the student, and an untrained union decides at 0.5
    half = multilabel_report(gold, decide(probs, DEFAULT_THRESHOLD), labels)
    return {"accuracy": report["micro_f1"], "per_class_accuracy": report["per_label_f1"],
            **report, "thresholds": dict(zip(labels, thresholds.tolist(), strict=True)),
            "at_half": {"micro_f1": half["micro_f1"], "macro_f1": half["macro_f1"]},
            "num_texts": len(table.texts), "kind": "multi-label"}


def predicted_labels(folder, texts: list[str], top: int = 3) -> list[str]:
    """The multi-label kind's predict: per text, the labels over their thresholds (or
    none), the `top` most probable labels with their probabilities, and the text's start."""
    from rich.markup import escape

    model, tokenizer, labels = _load(folder)
    features = tokenize(tokenizer, texts, 512)
    probs = predict_probs(model, tokenizer, features, FittedBatch(32), torch.device("cpu"))
    decided = decide(probs, saved_thresholds(model, labels))
    lines = []
    for text, row, chosen in zip(texts, probs, decided, strict=True):
        said = ", ".join(label for label, yes in zip(labels, chosen.tolist(), strict=True) if yes)
        ranked = row.argsort(descending=True)[:top].tolist()
        shown = "  ".join(f"{labels[i]} {100 * float(row[i]):.1f}%" for i in ranked)
        lines.append(f"[bold]{escape(said or '(none)')}[/bold]\t{escape(shown)}\t{escape(one_line(text)[:60])}")
    return lines
