"""Teaching rare classes: `kiwb teach`'s defaults, and class-balanced loss or sampling.

    python benchmarks/teach_balance.py             # ~2 h on 2 CPU cores, alone
    python benchmarks/teach_balance.py --retrain   # teach again the variants already taught
    python benchmarks/teach_balance.py --render    # the tables again, from the results file

debian-8's two teachers (teacher A: admin, games, graphics, mail; B: math, net, science,
sound), each taught on a small, evenly spread sample of its train rows, its rarest class cut
to RARE_TEXTS: 1,034 texts, 46 of them of the rarest class, the proportions that showed the
defect (1,080 texts, the rarest 46). Selected on the dev rows of its labels, as
`kiwb teach --dev` does; dev and test keep every row of the teacher's labels. Variants:

  old       the defaults before: 3 epochs at 5e-5, no minimum (`--min-steps 0`)
  new       kiwb teach's defaults now: the student's min_steps and automatic learning rate
  loss      new, with the loss weighted n / (C n_c) (`--balance loss`)
  sampler   new, with texts drawn so each class comes up alike (`--balance sampler`)

Chosen on dev (macro-F1, then the rarest class's accuracy), reported on test. Writes
benchmarks/out/cpu/teach_balance.json and the "Teaching rare classes" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8 lives beside this script
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)

OUT = HERE / "out" / "cpu" / "teach_balance"
RESULTS = HERE / "out" / "cpu" / "teach_balance.json"
TEACH_TEXTS = 1100
RARE_TEXTS = 46
VARIANTS = {
    "old": ["--epochs", "3", "--learning-rate", "5e-5", "--min-steps", "0"],
    "new": [],
    "loss": ["--balance", "loss"],
    "sampler": ["--balance", "sampler"],
}
TEACHERS = {"A": debian8.TEACHER_A, "B": debian8.TEACHER_B}


def spread_sample(rows: list[dict], count: int) -> list[dict]:
    """An evenly spread, deterministic sample (class shares as in the whole)."""
    if len(rows) <= count:
        return rows
    step = len(rows) / count
    return [rows[int(i * step)] for i in range(count)]


def write_splits() -> dict[str, dict[str, Path]]:
    """Per teacher: its train sample, and the dev and test rows of its labels."""
    data = debian8.split_data(OUT / "data", {"teacher_train": None, "train": None, "dev": None,
                                             "test": None})
    rows = {name: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            for name, path in data.items() if name in ("train", "dev", "test")}
    splits = {}
    for teacher, labels in TEACHERS.items():
        own = {name: [row for row in split if row["label"] in labels] for name, split in rows.items()}
        sample = spread_sample(own["train"], TEACH_TEXTS)
        counts = Counter(row["label"] for row in sample)
        rare = min(counts, key=counts.get)
        rare_rows = spread_sample([row for row in sample if row["label"] == rare], RARE_TEXTS)
        own["train"] = [row for row in sample if row["label"] != rare] + rare_rows
        splits[teacher] = {}
        for name, split in own.items():
            path = OUT / "data" / f"{teacher}-{name}.jsonl"
            path.write_text("".join(json.dumps(row) + "\n" for row in split), encoding="utf-8")
            splits[teacher][name] = path
    return splits


def figures(checkpoint: Path, data: Path) -> dict:
    """Accuracy, macro-F1 and per-class accuracy of a teacher on one split."""
    import torch

    from kiwb.workers.data import load_table
    from kiwb.workers.evaluate import evaluate_checkpoint

    table = load_table(str(data), text_column="text", label_column="label", role="evaluate")
    report = evaluate_checkpoint(checkpoint, table, torch.device("cpu"), 64, 128)
    return {key: report[key] for key in ("accuracy", "macro_f1", "per_class_accuracy")}


def run(base: str, retrain: bool) -> dict:
    splits = write_splits()
    results = {"machine": debian8.machine(), "teach_texts": TEACH_TEXTS, "teachers": {}}
    for teacher, labels in TEACHERS.items():
        counts = Counter(json.loads(line)["label"] for line in
                         splits[teacher]["train"].read_text(encoding="utf-8").splitlines())
        entry = {"train_counts": dict(counts), "variants": {}}
        for variant, options in VARIANTS.items():
            folder = OUT / f"teacher-{teacher}-{variant}"
            found = folder / "benchmark.json"
            if found.exists() and not retrain:
                entry["variants"][variant] = json.loads(found.read_text(encoding="utf-8"))
                continue
            # A checkpoint taught by an earlier, interrupted run is reused: its time was not
            # measured alone (another benchmark shared the CPU), so none is reported.
            seconds = peak = None
            if retrain or not (folder / "kiwb-teach.json").exists():
                started = time.perf_counter()
                done = debian8.kiwb("teach", "--base", base, "--data", splits[teacher]["train"],
                                    "--dev", splits[teacher]["dev"], "--labels", ",".join(labels),
                                    "--out", folder, "--force", "--device", "cpu", *options,
                                    log=OUT / "commands.log")
                seconds, peak = round(time.perf_counter() - started, 1), done["peak_rss_mb"]
            report = json.loads((folder / "kiwb-teach.json").read_text(encoding="utf-8"))
            entry["variants"][variant] = {
                "seconds": seconds, "peak_rss_mb": peak,
                "kept_step": report["dev"]["step"], "check": report["check"]["status"],
                "dev": figures(folder, splits[teacher]["dev"]),
                "test": figures(folder, splits[teacher]["test"]),
            }
            found.write_text(json.dumps(entry["variants"][variant], indent=2), encoding="utf-8")
            print(f"teacher {teacher} {variant}: {entry['variants'][variant]}", flush=True)
        results["teachers"][teacher] = entry
    RESULTS.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return results


def rarest(entry: dict) -> str:
    return min(entry["train_counts"], key=entry["train_counts"].get)


def choose_on_dev(results: dict) -> str:
    """The variant with the best mean dev macro-F1 over both teachers (ties: rarest class)."""
    def score(variant: str) -> tuple[float, float]:
        entries = results["teachers"].values()
        macro = sum(e["variants"][variant]["dev"]["macro_f1"] for e in entries) / len(entries)
        rare = sum(e["variants"][variant]["dev"]["per_class_accuracy"][rarest(e)] or 0.0
                   for e in entries) / len(entries)
        return round(macro, 4), rare
    return max(VARIANTS, key=score)


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} s"


def render(results: dict) -> list[str]:
    chosen = choose_on_dev(results)
    lines = ["| teacher | variant | steps kept | dev acc. | dev macro-F1 | dev rarest | "
             "test acc. | test macro-F1 | test rarest | check | time |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for teacher, entry in results["teachers"].items():
        rare = rarest(entry)
        for variant, found in entry["variants"].items():
            dev, test = found["dev"], found["test"]
            lines.append(
                f"| {teacher} ({rare}: {entry['train_counts'][rare]} of "
                f"{sum(entry['train_counts'].values()):,}) | {variant} | {found['kept_step']} | "
                f"{100 * dev['accuracy']:.1f} | {100 * dev['macro_f1']:.1f} | "
                f"{100 * (dev['per_class_accuracy'][rare] or 0):.1f} | {100 * test['accuracy']:.1f} | "
                f"{100 * test['macro_f1']:.1f} | {100 * (test['per_class_accuracy'][rare] or 0):.1f} | "
                f"{found['check']} | {_seconds(found['seconds'])} |")
    lines += ["", f"Chosen on dev (mean macro-F1 of both teachers): **{chosen}**."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="print the tables from the results")
    parser.add_argument("--retrain", action="store_true", help="teach every variant again")
    args = parser.parse_args()
    results = (json.loads(RESULTS.read_text(encoding="utf-8")) if args.render
               else run(debian8.minilm_path(), args.retrain))
    from report import write_section

    rendered = "\n".join(render(results))
    write_section("teach balance", "benchmarks/teach_balance.py", rendered)
    print(rendered)


if __name__ == "__main__":
    main()
