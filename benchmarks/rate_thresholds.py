"""Multi-label thresholds set without gold (issue 60): does a student that decides each label
where its yes-rate on unlabeled texts matches its targets' yes-rate on the pool beat deciding
at 0.5?

Reads a finished multi-label demo project (`kiwb demo --kind multi-label DIR`): for each run,
its kept checkpoint's probabilities on the pool and on the eval texts, and its targets made
again from the stored scores with the run's settings. Reports micro F1 on the eval texts at
0.5, at thresholds matched on the eval texts (their texts only, never their labels), at
thresholds matched on the pool, and tuned on the eval labels (the ceiling kiwb uses when an
eval set is labeled).

    python benchmarks/rate_thresholds.py DEMO_DIR [--out benchmarks/out/rate_thresholds.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from kiwb.kinds.multilabel.metrics import multilabel_report
from kiwb.kinds.multilabel.stored_pool import integrate_label_pool, label_data
from kiwb.kinds.multilabel.student import _load, multi_hot, predict_probs
from kiwb.kinds.multilabel.thresholds import DEFAULT_THRESHOLD, decide, tune_thresholds
from kiwb.project.config import load_config
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import IntegrationSettings
from kiwb.project.store import Store
from kiwb.workers.runtime import FittedBatch
from kiwb.workers.score import plan_scoring
from kiwb.workers.student import tokenize


def rate_matched(probs: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    """(L,) per label, the probability over which a share `rates[l]` of the texts lies: the
    student then says yes as often on these texts as its targets did on the pool."""
    return torch.stack([torch.quantile(probs[:, label], float(1 - rates[label]))
                        for label in range(probs.shape[1])])


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def measure(root: Path) -> dict:
    config = load_config(root / "kiwb.toml")
    pool, evaluation = _rows(root / "data" / "pool.jsonl"), _rows(root / "data" / "eval.jsonl")
    found = {}
    with Store(ProjectPaths(root).store) as store:
        tasks = [task for task in plan_scoring(config, store) if task.dataset == "unlabeled"]
        data = label_data(config, store, tasks)
        for run_dir in sorted((root / "runs").iterdir()):
            settings = IntegrationSettings.from_dict(
                json.loads((run_dir / "manifest.json").read_text())["method"])
            targets = integrate_label_pool(settings, store, data).result.targets
            last = sorted((run_dir / "checkpoints").iterdir())[-1]
            best = json.loads((last / "progress.json").read_text())["best"]["step"]
            model, tokenizer, labels = _load(run_dir / "checkpoints" / f"step-{best:07d}")
            model.eval()
            probs = {name: predict_probs(model, tokenizer,
                                         tokenize(tokenizer, [row["text"] for row in rows], 128),
                                         FittedBatch(64), torch.device("cpu"))
                     for name, rows in (("pool", pool), ("eval", evaluation))}
            gold = multi_hot([tuple(row["labels"]) for row in evaluation], labels)
            rates = (targets >= DEFAULT_THRESHOLD).float().mean(0)
            def micro(thresholds, probs=probs["eval"], gold=gold, labels=labels) -> float:
                report = multilabel_report(gold, decide(probs, thresholds), labels)
                return round(100 * report["micro_f1"], 1)

            found[run_dir.name] = {
                "at_half": micro(DEFAULT_THRESHOLD),
                "matched_on_eval_texts": micro(rate_matched(probs["eval"], rates)),
                "matched_on_pool": micro(rate_matched(probs["pool"], rates)),
                "tuned_on_eval_labels": micro(tune_thresholds(probs["eval"], gold)),
                "target_yes_rate": dict(zip(labels, [round(r, 3) for r in rates.tolist()], strict=True)),
            }
            print(run_dir.name, {k: v for k, v in found[run_dir.name].items()
                                 if not isinstance(v, dict)}, flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo", type=Path, help="a finished `kiwb demo --kind multi-label` folder")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "rate_thresholds.json")
    args = parser.parse_args()
    results = measure(args.demo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
