"""The student of an embedding project: one encoder and a pooling, taught on the unlabeled pool
to place every pair of texts as the teachers do (SimME's relational loss, kiwb.kinds.embedding
.relational), and while it trains, one linear projection per teacher for the optional direct
term (the student's embedding mapped into that teacher's space, as sentence-transformers'
EmbedDistillLoss does). Projections are kept in the training checkpoints and left out of the
export.

A row's target is the teachers' embeddings of its text laid end to end, then whether each
teacher covers the text, then each teacher's reliability on it (TargetLayout); the loss is over
the pairs of a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kiwb.core.learning_check import OK, LearningCheck
from kiwb.core.target_fit import correlation
from kiwb.errors import KiwbError
from kiwb.kinds.embedding import POOLING_KEY
from kiwb.kinds.embedding.probes import probe_figures
from kiwb.kinds.embedding.relational import (
    cosine_matrix,
    direct_loss,
    pair_weights,
    relational_loss,
    teacher_cosines,
)
from kiwb.kinds.embedding.stability import pooled
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.workers.feature_adapters import ADAPTERS, attach_adapters, load_adapter_weights
from kiwb.workers.runtime import FittedBatch, autocast_context
from kiwb.workers.shard_scoring import length_sorted_batches
from kiwb.workers.student import collate, tokenize
from kiwb.workers.teachers import resolve_checkpoint


@dataclass(frozen=True)
class TargetLayout:
    """Where each part of a row's target lies: T teachers of widths d_1..d_T, then T coverage
    flags, then T reliabilities: (n, sum d_t + 2T)."""

    widths: tuple[int, ...]

    @property
    def teachers(self) -> int:
        return len(self.widths)

    @property
    def size(self) -> int:
        return sum(self.widths) + 2 * self.teachers

    def split(self, targets: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """(each teacher's embeddings (n, d_t), coverage (T, n), reliability (T, n))."""
        pieces = list(torch.split(targets, [*self.widths, self.teachers, self.teachers], dim=1))
        return pieces[:self.teachers], pieces[-2].T, pieces[-1].T

    def join(self, embeddings: list[torch.Tensor], coverage: torch.Tensor,
             reliability: torch.Tensor) -> torch.Tensor:
        return torch.cat([*embeddings, coverage.T, reliability.T], dim=1)


class EmbeddingStudent:
    """What the Trainer asks of an embedding student (kiwb.workers.student_contract.Student).
    Holds the layout, the settings and the eval set's probe inputs: no tensors, no model."""

    kind = "embedding"

    def __init__(self, widths: tuple[int, ...], pooling: str = "mean", direct_weight: float = 0.0,
                 eval_labels: list[int] | None = None, eval_partners: list[str] | None = None,
                 max_length: int = 128):
        self.layout = TargetLayout(tuple(widths))
        self.max_length = max_length
        self.pooling = pooling
        self.direct_weight = direct_weight
        self.eval_labels = eval_labels
        self.eval_partners = eval_partners

    @property
    def uses_direct(self) -> bool:
        return self.direct_weight > 0

    # -- the model ------------------------------------------------------------------
    def load_base(self, base: str, labels: list[str]):
        from transformers import AutoTokenizer

        folder = resolve_checkpoint("student", base, role="student base")
        model = self._encoder(folder, f"student base {base}")
        setattr(model.config, POOLING_KEY, self.pooling)  # saved with every checkpoint
        tokenizer = AutoTokenizer.from_pretrained(folder)
        if self.uses_direct:
            attach_adapters(model, list(self.layout.widths))
        return model, tokenizer

    def load_checkpoint(self, folder):
        model = self._encoder(folder, str(folder))
        if not self.layout.widths:  # read for evaluation or prediction: pooled as it was saved
            return model
        setattr(model.config, POOLING_KEY, self.pooling)
        if self.uses_direct:
            attach_adapters(model, list(self.layout.widths))
            load_adapter_weights(model, folder, setting="[embedding] direct_weight")
        return model

    @staticmethod
    def _encoder(folder, name: str):
        from transformers import AutoModel

        try:
            return AutoModel.from_pretrained(folder, dtype=torch.float32)
        except Exception as error:
            raise KiwbError(f"{name}: cannot load an encoder from it "
                            f"({str(error).splitlines()[0][:200]}); point [training] student at a "
                            "transformers encoder folder (config.json and weights)") from None

    def features(self, tokenizer, data, max_length: int) -> list:
        return tokenize(tokenizer, data.texts, max_length)

    def eval_features(self, tokenizer, data, max_length: int) -> list:
        return tokenize(tokenizer, data.eval_texts, max_length)

    def embed(self, model, tokenizer, features, rows, device: torch.device) -> torch.Tensor:
        """(rows, d) the student's sentence embeddings of the rows' texts."""
        inputs = collate(tokenizer, features, rows, device)
        hidden = model(**inputs).last_hidden_state
        return pooled(hidden, inputs["attention_mask"], self.pooling).float()

    def logits(self, model, tokenizer, features, rows, device: torch.device) -> torch.Tensor:
        """(rows, d [+ sum d_t]): the embeddings, then (with the direct term) each projection's."""
        embedded = self.embed(model, tokenizer, features, rows, device)
        if not self.uses_direct:
            return embedded
        projections = getattr(getattr(model, "module", model), ADAPTERS)
        return torch.cat([embedded, *(projection(embedded).float() for projection in projections)],
                         dim=1)

    def loss_units(self, features, rows) -> int:
        """The loss averages over the pairs of its rows. A batch halved on out-of-memory, or
        shared by several ranks, loses the pairs across its pieces: each piece's loss then
        counts by its own pairs."""
        return max(1, len(rows) * (len(rows) - 1) // 2)

    # -- the losses -----------------------------------------------------------------
    def row_targets(self, data, rows, features=None) -> tuple[torch.Tensor, torch.Tensor]:
        return data.targets[rows], data.weights[rows]

    def row_gold(self, data, rows, features=None) -> torch.Tensor:
        raise KiwbError("an embedding student has no gold labels to train on; choose one of "
                        "the pair weightings (mc, maskout, equal)")

    def supervised_loss(self, logits, gold):
        raise KiwbError("an embedding student has no supervised run")

    def distillation_loss(self, method, logits, targets, weights, coverage=None) -> torch.Tensor:
        """SimME's relational loss over the batch's pairs, weighted by `method` (a pair
        weighting), plus the direct term's weight times its loss."""
        # Cosines in float32 whatever autocast runs the encoder in: bf16 rounds them to steps of
        # ~4e-3, about the gaps the loss is left with late in training.
        with torch.autocast(device_type=logits.device.type, enabled=False):
            logits = logits.float()
            teachers, covered, reliable = self.layout.split(targets.float())
            width = logits.shape[1] - (sum(self.layout.widths) if self.uses_direct else 0)
            loss = relational_loss(logits[:, :width], teacher_cosines(teachers),
                                   pair_weights(method, covered, reliable))
            if self.uses_direct:
                projected = list(torch.split(logits[:, width:], list(self.layout.widths), dim=1))
                loss = loss + self.direct_weight * direct_loss(projected, teachers, covered)
        return loss

    # -- evaluation and the learning check ------------------------------------------
    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        """The probes on the eval set (kiwb.kinds.embedding.probes), as a train.eval event
        holds them: the headline ("accuracy") is kNN accuracy where the eval set has labels,
        else retrieval MRR; "macro_f1" holds retrieval MRR where it has partners, else kNN."""
        embedded = embed_all(self, model, tokenizer, features, batch, device, autocast_dtype)
        partners = None
        if self.eval_partners is not None:
            partners = embed_all(self, model, tokenizer, tokenize(
                tokenizer, self.eval_partners, self.max_length), batch, device, autocast_dtype)
        labels = torch.tensor(self.eval_labels) if self.eval_labels is not None else None
        return probe_report(probe_figures(embedded, labels, partners), len(features))

    def fit(self, model, tokenizer, features, data, rows, batch, device, autocast_dtype) -> dict:
        """How well the student places the pool rows `rows` as its targets do: the correlation,
        over every pair of them that some teacher covers, of the student's cosine with the
        covering teachers' mean cosine. {"fit": correlation}."""
        embedded = embed_all(self, model, tokenizer, [features[int(row)] for row in rows], batch,
                             device, autocast_dtype)
        teachers, covered, _ = self.layout.split(data.targets[rows].float())
        weights = pair_weights("maskout", covered)  # (T, m, m): the teachers covering each pair
        total = weights.sum(0)
        target = (weights * teacher_cosines(teachers)).sum(0) / total.clamp_min(1.0)
        upper = torch.triu(torch.ones_like(total, dtype=torch.bool), 1) & (total > 0)
        return {"fit": correlation(cosine_matrix(embedded)[upper], target[upper])}

    min_steps = SequenceStudent.min_steps  # no outputs to learn a yes for

    def check_labels(self, data) -> list[str]:
        return []

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        return []  # no classes: nothing to count

    def eval_check(self, data, metrics: dict, target_shares: list[float]) -> LearningCheck:
        return LearningCheck(OK)  # no classes to collapse: the probes are the check

    def pool_check(self, data, predicted_counts, target_shares) -> LearningCheck:
        return LearningCheck(OK)

    def target_shares(self, data) -> torch.Tensor:
        return torch.zeros(0)


@torch.no_grad()  # not inference_mode: it runs between training steps of the same model
def embed_all(student: EmbeddingStudent, model, tokenizer, features,
              batch_size: int | FittedBatch, device: torch.device,
              autocast_dtype: str = "float32") -> torch.Tensor:
    """(n, d) the student's embeddings of every feature row, in input order, on the CPU."""
    batch = batch_size if isinstance(batch_size, FittedBatch) else FittedBatch(batch_size)
    was_training = model.training
    model.eval()

    def run(size: int) -> np.ndarray:
        found = None
        lengths = [len(feature["input_ids"]) for feature in features]
        for rows in length_sorted_batches(lengths, size):
            values = student.embed(model, tokenizer, features, rows, device).cpu().numpy()
            if found is None:
                found = np.zeros((len(features), values.shape[1]), dtype=np.float32)
            found[rows] = values
        return found

    try:
        with autocast_context(device, autocast_dtype):
            return torch.from_numpy(batch.run(run, device, "evaluating", items=len(features)))
    finally:
        model.train(was_training)


def probe_report(figures: dict[str, float], texts: int) -> dict:
    """Probe figures in the shape of an evaluation (kiwb.project.records.TrainEval): the
    headline and second figure, no classes, every probe under details."""
    if not figures:
        raise KiwbError("the eval set has neither labels nor partner texts to probe with; set "
                        "label_column or pair_column in [data.eval]")
    headline = figures.get("knn_accuracy", figures.get("mrr"))
    return {"accuracy": headline, "macro_f1": figures.get("mrr", headline),
            "per_class_accuracy": {}, "confusion": [], "num_texts": texts,
            "details": {"probes": figures}}


def evaluate_encoder(checkpoint, table, device: torch.device, batch_size: int,
                     max_length: int) -> dict:
    """The embedding kind's evaluate: the probes of a student checkpoint (or any
    encoder folder kiwb exported) on `table`, pooled as its export says."""
    from transformers import AutoTokenizer

    from kiwb.kinds.embedding.encoders import read_pooling_rule

    pooling = read_pooling_rule(checkpoint, recorded_pooling(checkpoint)).pooling
    student = EmbeddingStudent((), pooling, max_length=max_length,
                               eval_labels=_label_ids(table.labels), eval_partners=table.partners)
    model = student.load_checkpoint(checkpoint).to(device)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    features = tokenize(tokenizer, table.texts, max_length)
    report = student.evaluate(model, tokenizer, features, None, batch_size, device, "float32")
    return {**report, "kind": "embedding"}


def recorded_pooling(folder) -> str | None:
    """The pooling a kiwb student's config.json records, or None: then the folder's
    modules.json says (an export, or any sentence-transformers folder)."""
    import json
    from pathlib import Path

    try:
        found = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found.get(POOLING_KEY) if isinstance(found, dict) else None


def _label_ids(labels: list[str] | None) -> list[int] | None:
    if labels is None:
        return None
    index = {label: number for number, label in enumerate(dict.fromkeys(labels))}
    return [index[label] for label in labels]
