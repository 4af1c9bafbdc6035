"""The GPU check of the teacher kinds beside single-label: token (NER) and multi-label.

    python benchmarks/gpu_kinds.py --inputs DIR [--out FILE]

DIR holds what a GPU machine cannot fetch: `tokenizer/` (all-MiniLM-L6-v2's config and
tokenizer files, no weights), `texts.json` (Debian descriptions) and `rows.json` (NER
sentences with `tokens`). It checks, and prints as it goes:
  1. MC scoring's cost against the K x eval floor for each kind, on a teacher of MiniLM's
     shape (random weights: the cost depends on the shape, not the weights), through the
     benchmarks' own speed functions (debian8, debian_tags, ner_en);
  2. the quick NER and multi-label demos, end to end on the device `auto` picks (build,
     score, integrate, train, evaluate, export): exit status, seconds and figures.
Writes the figures as JSON (benchmarks/out/gpu_kinds.json unless --out says otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
import debian_tags  # noqa: E402
import ner_en  # noqa: E402

TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def minilm_shaped(inputs: Path, folder: Path, kind: str) -> Path:
    """A teacher with all-MiniLM-L6-v2's shape and tokenizer, random weights, of one kind."""
    import torch
    from transformers import (
        AutoConfig,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    torch.manual_seed(0)
    labels = TAGS if kind == "token" else [f"label{i}" for i in range(8)]
    config = AutoConfig.from_pretrained(inputs / "tokenizer", num_labels=len(labels),
                                        id2label=dict(enumerate(labels)),
                                        label2id={name: i for i, name in enumerate(labels)})
    if kind == "multi-label":
        config.problem_type = "multi_label_classification"
    model_class = (AutoModelForTokenClassification if kind == "token"
                   else AutoModelForSequenceClassification)
    model_class.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(inputs / "tokenizer").save_pretrained(folder)
    return folder


def speeds(inputs: Path, scratch: Path) -> dict:
    texts = json.loads((inputs / "texts.json").read_text())
    rows = json.loads((inputs / "rows.json").read_text())
    measured = {}
    for kind, measure, data in (("single-label", debian8.speed, texts),
                                ("multi-label", debian_tags.speed, texts),
                                ("token", ner_en.speed, rows)):
        teacher = minilm_shaped(inputs, scratch / kind, kind)
        found = measure(teacher, data)
        measured[kind] = found
        rate = next(iter(found["texts_per_s"].values()))  # kiwb's own (loop) scoring comes first
        print(f"  {kind}: {rate:,.0f} texts/s, {found['vs_floor']:.2f}x the K x eval floor",
              flush=True)
    return measured


def demo(kind: str, scratch: Path) -> dict:
    root = scratch / f"demo-{kind}"
    started = time.perf_counter()
    ran = subprocess.run([sys.executable, "-m", "kiwb", "demo", str(root), "--kind", kind, "--no-ui"],
                         capture_output=True, text=True, env={**os.environ, "KIWB_DEMO_QUICK": "1"})
    seconds = time.perf_counter() - started
    results = root / "demo-results.json"
    found = {"returncode": ran.returncode, "seconds": round(seconds, 1),
             "results": json.loads(results.read_text()) if results.is_file() else None,
             "stderr_tail": ran.stderr.strip().splitlines()[-5:]}
    print(f"  demo {kind}: exit {ran.returncode} in {seconds:.0f}s", flush=True)
    if ran.returncode:
        print("\n".join(found["stderr_tail"]), flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "gpu_kinds.json")
    args = parser.parse_args()
    import torch

    figures: dict = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                     "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as scratch:
        print("1. MC scoring against the K x eval floor, MiniLM-shaped teachers", flush=True)
        figures["speed"] = speeds(args.inputs, Path(scratch))
        print("2. quick demos of the other kinds", flush=True)
        figures["demos"] = {kind: demo(kind, Path(scratch)) for kind in ("token", "multi-label")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    failed = [kind for kind, found in figures["demos"].items() if found["returncode"]]
    print(f"{len(failed)} demo(s) failed; figures in {args.out}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
