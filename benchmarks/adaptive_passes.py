"""Adaptive MC passes on debian-8: how many passes `mc_passes = "auto"` spends, and how often
its routing agrees with K = 16.

    python benchmarks/adaptive_passes.py --draw     # 32 passes per text and teacher (dev, test)
    python benchmarks/adaptive_passes.py            # the figures, from the drawn passes
    python benchmarks/adaptive_passes.py --render   # BENCHMARKS.md's section again

The draw keeps every pass's probabilities (kiwb's scorer with keep_passes, the debian-8
teachers of benchmarks/debian8.py, seed 0). Passes 1-16 are the reference: K = 16, as
`kiwb score` makes it. Passes 17-32 are an independent sample that adaptive scoring draws from
in order (kiwb.core.adaptive_passes.simulate: the same rule `kiwb score` applies, over the
same schedule), so its agreement with the reference is an honest one; the agreement of two
independent K = 16 runs (passes 1-16 against 17-32) is measured beside it, since no rule can
beat the noise of K = 16 itself. The rule's z is chosen on dev and reported on test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DRAWN = 32
REFERENCE = 16
OUT = HERE / "out" / "cpu"


def draw() -> None:
    """Score dev and test with both teachers, keeping all 32 passes."""
    import torch

    from kiwb.workers.cpu_share import CpuShare
    from kiwb.workers.runtime import load_classifier
    from kiwb.workers.shard_scoring import ScoringSettings, prepare_tokenizer, score_texts

    share = CpuShare("benchmarks/adaptive_passes.py --draw")
    print(share.join(), flush=True)
    from transformers import AutoTokenizer

    folder = OUT / "passes"
    folder.mkdir(parents=True, exist_ok=True)
    settings = ScoringSettings(passes=DRAWN, batch_size=32, max_length=128, strategy="loop",
                               dtype="float32", seed=0, keep_passes=True)
    for split in ("dev", "test"):
        rows = [json.loads(line) for line in open(OUT / f"{split}.jsonl", encoding="utf-8")]
        texts = [row["text"] for row in rows]
        for teacher in ("A", "B"):
            path = folder / f"{split}-{teacher}.npz"
            if path.exists():
                continue
            model = load_classifier(OUT / f"teacher_{teacher}").eval()
            tokenizer = AutoTokenizer.from_pretrained(OUT / f"teacher_{teacher}")
            prepare_tokenizer(tokenizer, model)
            arrays, done = {}, 0
            for start in range(0, len(texts), 128):  # in shards, as kiwb scores
                part = score_texts(model, tokenizer, texts[start:start + 128], settings,
                                   torch.device("cpu"), shard_seed=start // 128)
                for name, values in part.items():
                    arrays.setdefault(name, []).append(values)
                done += len(part["det_logits"])
                line = share.rebalance()
                print(f"{split} {teacher}: {done}/{len(texts)}" + (f" · {line}" if line else ""),
                      flush=True)
            np.savez(path, labels=np.array([model.config.id2label[i] for i in
                                            range(model.config.num_labels)]),
                     gold=np.array([row["label"] for row in rows]),
                     **{name: np.concatenate(values) for name, values in arrays.items()})
    share.leave()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draw", action="store_true", help="score dev and test, 32 passes")
    parser.add_argument("--render", action="store_true", help="only re-render BENCHMARKS.md")
    args = parser.parse_args()
    if args.draw:
        draw()
        return
    raise SystemExit("the figures part is not written yet")


if __name__ == "__main__":
    main()
