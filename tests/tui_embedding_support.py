"""A synthetic embedding project for the workbench's snapshots: two encoder folders (one laid
out by sentence-transformers, one bare with pooling set), the score shards' histogram events,
an integration with its conflicting pairs, and a trained run's probe evaluations, all written
with the store's own API and fixed numbers (no models, no clocks)."""

from __future__ import annotations

import json
from pathlib import Path

from tui_support import TEXTS, record_integration, write_teacher

from kiwb.project.instances import replace_instances
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import (
    BestCheckpoint,
    IntegrationSettings,
    IntegrationSummary,
    ScoreShard,
    TrainDone,
    TrainEval,
    TrainStart,
    TrainStep,
    teacher_facts,
)
from kiwb.project.store import Store

KEY = "synthetic-embedding"
RUN = "mc"
PROBES = {"general": {"knn_accuracy": 0.7, "recall@1": 0.55, "recall@10": 0.9, "mrr": 0.66},
          "domain": {"knn_accuracy": 0.8, "recall@1": 0.6, "recall@10": 0.95, "mrr": 0.7},
          "concatenation": {"knn_accuracy": 0.8, "recall@1": 0.65, "recall@10": 0.95, "mrr": 0.74},
          "average": {"knn_accuracy": 0.75, "recall@1": 0.6, "recall@10": 0.95, "mrr": 0.71}}


def embedding_project(root: Path) -> Path:
    """The project folder, its store filled as score, integrate and train leave it."""
    general = write_teacher(root / "teachers" / "general", ("LABEL_0", "LABEL_1"),
                            architecture="BertModel", weights_bytes=8192)
    config = json.loads((general / "config.json").read_text())
    (general / "config.json").write_text(json.dumps({**config, "hidden_size": 384}))
    (general / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (general / "1_Pooling").mkdir()
    (general / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True}))
    domain = write_teacher(root / "teachers" / "domain", ("LABEL_0", "LABEL_1"),
                           architecture="RobertaModel", model_type="roberta",
                           tokenizer="RobertaTokenizerFast", weights_bytes=16384)
    config = json.loads((domain / "config.json").read_text())
    (domain / "config.json").write_text(json.dumps({**config, "hidden_size": 768}))
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "pool.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    (data / "probe.jsonl").write_text("".join(
        json.dumps({"text": t, "label": str(i % 4), "partner": t.upper()}) + "\n"
        for i, t in enumerate(TEXTS)))
    (root / "kiwb.toml").write_text("\n".join([
        'name = "encoders"', "[[teachers]]", 'name = "general"', 'path = "teachers/general"',
        "[[teachers]]", 'name = "domain"', 'path = "teachers/domain"', 'pooling = "cls"',
        "[embedding]", '[data.unlabeled]', 'path = "data/pool.jsonl"', "[data.eval]",
        'path = "data/probe.jsonl"', 'label_column = "label"', 'pair_column = "partner"']) + "\n")
    ProjectPaths(root).make_layout()
    with Store(ProjectPaths(root).store) as store:
        _scores(store)
        _integration(store)
        _run(root, store)
    return root


def _scores(store: Store) -> None:
    # steadiness: general steadier on most texts; both read every text but for two long ones
    shapes = {"general": ([0] * 9 + [1, 2, 3, 2, 1, 1] + [0] * 5, [0] * 15 + [1, 0, 0, 0, 9]),
              "domain": ([0] * 6 + [2, 3, 2, 1, 1, 1] + [0] * 8, [0] * 12 + [2] + [0] * 6 + [8])}
    for teacher, (steadiness, share) in shapes.items():
        shard = ScoreShard(teacher=teacher, dataset="unlabeled", key=f"score-{teacher}", shard=0,
                           rows=len(TEXTS), seconds=1.0, mc_confidence_hist=steadiness,
                           det_confidence_hist=share)
        store.append_event(shard.kind, shard.to_dict())


PAIRS = [(0, 4, (0.82, 0.21)), (1, 6, (0.35, 0.88)), (2, 5, (0.9, 0.48)), (3, 7, (0.61, 0.95)),
         (0, 8, (0.55, 0.3))]


def _integration(store: Store) -> None:
    margins = [1 - abs(a - b) for _, _, (a, b) in PAIRS]
    summary = IntegrationSummary(
        num_texts=len(TEXTS),
        per_teacher=teacher_facts(
            ["general", "domain"], ["score-general", "score-domain"], [6, 4],
            own={"general": {"width": 384, "coverage": 1.0, "dispersion_median": 0.004},
                 "domain": {"width": 768, "coverage": 0.8, "dispersion_median": 0.011}}),
        labels=["similar", "not similar"], overlapping_labels=[],
        margin_quantiles={"0.0": min(margins), "0.5": sorted(margins)[2], "1.0": max(margins)},
        margin_histogram=[0] * 6 + [0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0],
        conflict_threshold=1.0, conflicts=len(PAIRS), teachers_kind="embedding",
        details={"texts": len(TEXTS), "weighting": "mc",
                 "pairs": len(PAIRS), "eval": {"texts": len(TEXTS), "rows": PROBES}})
    record_integration(store, KEY, summary, IntegrationSettings(method="mc"))
    rows = []
    for number, (first, second, cosines) in enumerate(PAIRS):
        texts = [TEXTS[first], TEXTS[second]]
        details = {"pair": [first, second], "texts": texts, "cosines": list(cosines),
                   "disagreement": abs(cosines[0] - cosines[1]), "scores": list(cosines)}
        rows.append((number, 1 - abs(cosines[0] - cosines[1]), int(cosines[1] > cosines[0]),
                     0 if sum(cosines) / 2 >= 0.5 else 1, None, details, " ⟷ ".join(texts)))
    replace_instances(store.connection, KEY, rows)


def _run(root: Path, store: Store) -> None:
    def event(record) -> None:
        store.append_event(record.kind, record.to_dict(), run=RUN)

    event(TrainStart(step=0, total_steps=20, method="mc"))
    for step in range(2, 21, 2):
        event(TrainStep(step=step, loss=0.02 / step, lr=1e-4, texts_per_s=100.0, total_steps=20))
        if step % 10 == 0:
            probes = {"knn_accuracy": 0.7 + step / 200, "recall@1": 0.6, "recall@10": 0.95,
                      "mrr": 0.7 + step / 400}
            event(TrainEval(step=step, accuracy=probes["knn_accuracy"], metric="probe score",
                            macro_f1=probes["mrr"],
                            per_class_accuracy={}, confusion=[], num_texts=len(TEXTS),
                            routing_accuracy=None,
                            details={"probes": probes}))
    event(TrainDone(step=20, best=BestCheckpoint(step=20, accuracy=0.8)))
    run_dir = ProjectPaths(root).run_dir(RUN)
    (run_dir / "checkpoints" / "step-0000020").mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").write_text(json.dumps({"labels": [], "kind": "embedding",
                                                       "method": {"method": "mc"}}))
