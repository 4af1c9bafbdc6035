"""What a dropout-on forward costs against an eval forward, with torch's dropout and with
kiwb's sampled dropout, on one real MiniLM teacher: the profile behind BENCHMARKS.md.

    python benchmarks/dropout_profile.py [TEACHER_FOLDER] [--ops]

Modes are timed in turns (eval, torch, kiwb, eval, ...) so that a noisy machine slows them
alike; the ratios are medians over rounds. `--ops` adds torch.profiler's top operators.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path
from unittest import mock

import torch

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("teacher", nargs="?", type=Path, default=HERE / "out" / "cpu" / "teacher_A")
    parser.add_argument("--texts", type=Path, default=HERE / "out" / "cpu" / "test.jsonl")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", action="store_true", help="also print the top operators per mode")
    args = parser.parse_args()

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers.sampled_dropout import sampled_dropout

    tokenizer = AutoTokenizer.from_pretrained(args.teacher)
    model = AutoModelForSequenceClassification.from_pretrained(args.teacher)
    texts = [json.loads(line)["text"] for line in open(args.texts)][: args.batch]
    batch = tokenizer(texts, truncation=True, max_length=128, padding=True, return_tensors="pt")
    cpu = torch.device("cpu")

    from kiwb.core import sampled_dropout as core
    from kiwb.workers import sampled_dropout as workers

    # kiwb's sampler with one of its parts undone, to see what each part is worth.
    ablations = {
        "kiwb": {},
        "kiwb, one (B, H, L, L) attention block": {(core, "_BLOCK_ELEMENTS"): 1 << 62},
        "kiwb, bits from torch's generator": {(workers, "numpy_lanes"): lambda seed: core.torch_lanes},
    }

    def forward(mode: str) -> float:
        model.train(mode != "eval")
        started = time.perf_counter()
        with torch.no_grad():
            if mode in ablations:
                with contextlib.ExitStack() as patches:
                    for (module, name), value in ablations[mode].items():
                        patches.enter_context(mock.patch.object(module, name, value))
                    with sampled_dropout(model, cpu, seed=0):
                        model(**batch)
            else:
                model(**batch)
        return time.perf_counter() - started

    modes = ("eval", "torch", *ablations)
    for mode in modes:
        forward(mode)  # warm-up
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        for mode in modes:
            seconds[mode].append(forward(mode))
    ratios = {mode: statistics.median(s / e for s, e in zip(seconds[mode], seconds["eval"], strict=True))
              for mode in modes}
    print(f"batch {tuple(batch['input_ids'].shape)}, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds")
    names = {"eval": "eval (dropout off; the floor's pass)", "torch": "train mode, torch's dropout",
             "kiwb": "train mode, kiwb's sampled dropout",
             **{mode: f"train mode, {mode}" for mode in ablations if mode != "kiwb"}}
    print("| mode | s / forward (median) | vs eval (median ratio) |\n|---|---|---|")
    for mode in modes:
        print(f"| {names[mode]} | {statistics.median(seconds[mode]):.3f} | {ratios[mode]:.2f}× |")
    if args.ops:
        from torch.profiler import ProfilerActivity, profile

        for mode in modes:
            with profile(activities=[ProfilerActivity.CPU]) as profiled:
                forward(mode)
            print(f"\n{mode}:\n" + profiled.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))


if __name__ == "__main__":
    main()
