"""kiwb's jobs killed with SIGKILL at random moments (issue 59), more of them than CI kills:
score, integrate, train, export and labels import on tiny real models, each killed at a moment
drawn at random from its uninterrupted run's time, then every invariant of
tests/crash_points.py checked (the store opens and SQLite finds nothing wrong, no file cut
short is read as whole, a re-run or resume finishes, the labels given before are all there,
the result equals the uninterrupted run's).

    python benchmarks/crash_points.py              # 30 kills per job kind (150)
    python benchmarks/crash_points.py --points 60

Writes benchmarks/out/crash_points.json and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the kill-point driver the tests run too
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
from crash_points import KINDS, build, trial  # noqa: E402
from report import write_section  # noqa: E402


def tiny_models(root: Path) -> tuple[Path, Path]:
    """The tests' two tiny teachers and untrained student base (tests/conftest.py's)."""
    import torch
    from tiny import (
        TEACHER_A_LABELS,
        TEACHER_B_LABELS,
        build_teacher,
        tiny_bert_config,
        wordpiece_tokenizer,
    )
    from transformers import BertForSequenceClassification

    torch.set_num_threads(1)
    teachers = root / "teachers"
    build_teacher(teachers / "teacher_a", "bert", TEACHER_A_LABELS, seed=1)
    build_teacher(teachers / "teacher_b", "roberta", TEACHER_B_LABELS, seed=2)
    student = root / "student_base"
    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(student)
    BertForSequenceClassification(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(student)
    tokenizer.save_pretrained(student)
    return teachers, student


def render(results: dict) -> str:
    lines = [f"Kill points tried, invariants held ({results['points']} per job kind, "
             f"{results['seconds'] / 60:.0f} min on this machine; the uninterrupted runs' times "
             "bound the random moments):", "",
             "| job | kill points | killed while running | invariants checked | held | failed |",
             "|---|---|---|---|---|---|"]
    for kind, entry in results["kinds"].items():
        lines.append(f"| {kind} | {entry['points']} | {entry['killed']} | {entry['checked']} | "
                     f"{entry['held']} | {entry['failed']} |")
    total = results["kinds"].values()
    lines += ["", f"In all: {sum(e['points'] for e in total)} kill points, "
              f"{sum(e['held'] for e in total)} of {sum(e['checked'] for e in total)} invariant "
              "checks held."]
    failures = [f for entry in total for f in entry["failures"]]
    if failures:
        lines += ["", "Failed: " + "; ".join(failures[:10])]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=30, help="kills per job kind")
    args = parser.parse_args()
    started = time.monotonic()
    results = {"points": args.points, "machine": debian8.machine(), "kinds": {}}
    with tempfile.TemporaryDirectory(prefix="kiwb-crash-") as scratch:
        teachers, student = tiny_models(Path(scratch))
        bench = build(Path(scratch) / "bench", teachers, student)
        results["timings"] = bench.timings
        for kind in KINDS:
            with ThreadPoolExecutor(max_workers=2) as pool:
                trials = list(pool.map(
                    lambda number, kind=kind: trial(bench, kind, number,
                                                    random.Random(f"{kind} {number}")),
                    range(args.points)))
            checks = [(item, name, held) for item in trials for name, held in item.held.items()]
            results["kinds"][kind] = {
                "points": len(trials), "killed": sum(item.killed for item in trials),
                "checked": len(checks), "held": sum(held for _, _, held in checks),
                "failed": sum(not held for _, _, held in checks),
                "failures": [f"{kind} at {item.delay} s: {name} ({'; '.join(item.notes)})"
                             for item, name, held in checks if not held]}
            print(kind, results["kinds"][kind], flush=True)
    results["seconds"] = round(time.monotonic() - started, 1)
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "crash_points.json").write_text(json.dumps(results, indent=2))
    write_section("crash points", "benchmarks/crash_points.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
