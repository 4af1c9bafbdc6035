"""What keeping each teacher's representation costs scoring (issue 42): time and bytes.

    python benchmarks/representation_cost.py [--teacher FOLDER] [--texts 128] [--repeats 3]

Times, on the same texts in one run (alternating, so a noisy machine weighs on both alike):
MC scoring as `kiwb score` runs it (K = 16, batch 32, max length 128) without and with the
representation kept from its dropout-off forward; the representation alone (one dropout-off
forward per text, what `kiwb score` adds to scores made before); and one eval forward (the
floor). Bytes: a representation shard as kiwb writes it, per text and teacher, against
2 bytes x width. Default teacher: debian-8's teacher A (benchmarks/out/cpu/teacher_A, made by
debian8.py). Writes benchmarks/out/representation_cost.json and its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", type=Path, default=HERE / "out" / "cpu" / "teacher_A")
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers.representation_sets import represent_texts
    from kiwb.workers.shard_scoring import ScoringSettings, length_sorted_batches, score_texts

    torch.manual_seed(0)
    device = torch.device("cpu")
    model = AutoModelForSequenceClassification.from_pretrained(args.teacher).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.teacher)
    texts = [json.loads(line)["text"] for line in open(HERE / "out" / "cpu" / "test.jsonl")][:args.texts]
    plain = ScoringSettings(passes=16, batch_size=32, max_length=128, strategy="loop",
                            dtype="float32", seed=0)
    keeping = dataclasses.replace(plain, representation="head")

    @torch.no_grad()
    def floor() -> None:  # one eval forward per text, kiwb's batching
        encodings = tokenizer(texts, truncation=True, max_length=128)
        rows = [{k: encodings[k][i] for k in encodings.keys()} for i in range(len(texts))]
        for batch in length_sorted_batches([len(r["input_ids"]) for r in rows], 32):
            model(**tokenizer.pad([rows[i] for i in batch], return_tensors="pt"))

    runs = {
        "scoring": lambda: score_texts(model, tokenizer, texts, plain, device, shard_seed=0),
        "scoring + representation": lambda: score_texts(model, tokenizer, texts, keeping, device,
                                                        shard_seed=0),
        "representation alone": lambda: represent_texts(model, tokenizer, texts, plain, device, "head"),
        "one eval forward": floor,
    }
    runs["one eval forward"]()  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    kept = represent_texts(model, tokenizer, texts, plain, device, "head")["representation"]
    buffer = io.BytesIO()
    np.savez(buffer, representation=kept)
    width = kept.shape[1]
    results = {
        "machine": debian8.machine(), "teacher": str(args.teacher), "texts": len(texts),
        "passes": 16, "seconds": seconds, "median_seconds": median,
        "overhead": median["scoring + representation"] / median["scoring"] - 1,
        "alone_vs_scoring": median["representation alone"] / median["scoring"],
        "width": width, "bytes_per_text": buffer.getbuffer().nbytes / len(texts),
        "bytes_per_text_limit": 2 * width,
    }
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "representation_cost.json").write_text(json.dumps(results, indent=2))
    from report import write_section

    write_section("representation cost", "benchmarks/representation_cost.py", render(results))
    print(render(results))


def render(results: dict) -> str:
    median = results["median_seconds"]
    n = results["texts"]
    lines = ["## Representations: what keeping them costs", "",
             f"{n} debian-8 test texts, teacher A (MiniLM, width {results['width']}), K = "
             f"{results['passes']}, batch 32, max length 128, on {results['machine']['cpu']} "
             f"({results['machine']['cores']} cores); each row timed {len(results['seconds']['scoring'])} "
             "times, alternating, median shown.", "",
             "| what | seconds | texts/s | vs scoring |", "|---|---|---|---|"]
    for name, value in median.items():
        lines.append(f"| {name} | {value:.2f} | {n / value:.1f} | {value / median['scoring']:.3f}× |")
    lines += ["", f"Keeping the representation adds **{100 * results['overhead']:+.1f}%** to scoring "
              f"(aim: at most +10%). Drawing it alone for scores made before costs "
              f"{100 * results['alone_vs_scoring']:.1f}% of the scoring. On disk: "
              f"**{results['bytes_per_text']:.0f} bytes per text and teacher** in a representation "
              f"shard of {n} texts (float16; aim: at most 2 × width = "
              f"{results['bytes_per_text_limit']} bytes, plus the file's header)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
