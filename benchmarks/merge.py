"""Merge or distill (issue 29): weight merging of the teachers against MUKI students, on the
teachers' own test data.

    python benchmarks/merge.py                  # debian-8 (cpu preset), the demo, ner-en
    python benchmarks/merge.py --part debian8   # one part: debian8, demo or ner
    python benchmarks/merge.py --render         # the tables again from the results file

debian-8: debian8.py's CPU teachers A and B (MiniLM, fine-tuned from all-MiniLM-L6-v2) and its
scored project (pool 2,000, dev 400 as [data.eval]); every merge is chosen on dev and reported
on test (1,680), beside the teachers alone, their Ensemble, MUKI-Hard (default routing) and
MUKI-Hard started from the best merge on dev. The demo: `kiwb demo`'s project, merged and
trained the same way; it has one labeled set, so its dev-chosen rows are chosen on the texts
they are reported on (said in the table). ner-en: ner_en.py's MiniLM taggers, merged in its
project (dev) and evaluated on its test split beside its students' test figures.
Resumable: a run that exists is evaluated again, not rebuilt.
Writes benchmarks/out/merge/results.json and the "merge" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (its splits, teachers, scored projects and runner)
from report import percent, write_section  # noqa: E402

from kiwb.project.run_folder import read_best  # noqa: E402

OUT = HERE / "out" / "merge"
TIMEOUT = 3 * 3600
# (run, kiwb merge options, row title); the defaults are given, the dev-chosen left to kiwb
MERGES = [
    ("merge-average", ["--method", "average"], "average"),
    ("merge-ta-default", ["--method", "task-arithmetic", "--lambda", "0.3"],
     "task arithmetic, default (lambda 0.3)"),
    ("merge-ta-dev", ["--method", "task-arithmetic"], "task arithmetic, chosen on dev"),
    ("merge-ties-default", ["--method", "ties", "--lambda", "1", "--top-k", "20"],
     "TIES, default (lambda 1, k 20%)"),
    ("merge-ties-dev", ["--method", "ties"], "TIES, chosen on dev"),
]


def kiwb(*args, log: Path) -> dict:
    return debian8.kiwb(*args, log=log, timeout=TIMEOUT)


def merge_rows(project: Path, test: Path | None, log: Path, results: dict,
               evaluate_options: tuple = ()) -> None:
    """Every merge of MERGES in `project`, its wall time and figures on `test` (None: on the
    project's eval set)."""
    for run, options, _ in MERGES:
        if read_best(project / "runs" / run) is None:
            results.setdefault("seconds", {})[run] = kiwb("merge", project, "--run", run,
                                                          *options, "--foreground",
                                                          log=log)["seconds"]
        manifest = json.loads((project / "runs" / run / "manifest.json").read_text())
        results.setdefault("merges", {})[run] = manifest["merge"]
        results.setdefault("figures", {})[run] = evaluate(project, run, test, log,
                                                          evaluate_options)


def evaluate(project: Path, run: str, test: Path | None, log: Path, options: tuple = ()) -> dict:
    data = ("--data", test, *options) if test is not None else ()
    report = json.loads(kiwb("evaluate", project, "--run", run, *data, "--json",
                             log=log)["stdout"])
    return {key: report.get(key) for key in ("accuracy", "macro_f1", "num_texts")}


def best_merge(results: dict) -> str:
    """The merge with the best eval (dev) figure its own run recorded."""
    def dev(run: str) -> float:
        tried = results["merges"][run]["tried"]
        return max(each["accuracy"] or 0.0 for each in tried)
    return max(results["merges"], key=dev)


def students(project: Path, test: Path | None, log: Path, results: dict,
             evaluate_options: tuple = ()) -> None:
    """MUKI-Hard from the base and from the best merge (on dev), with their dev curves."""
    from kiwb.project.store import Store

    best = best_merge(results)
    results["best_merge"] = best
    for run, options in (("muki-hard", []), ("muki-hard-from-merge",
                                              ["--init-from-merge", best])):
        if debian8._run_state(project / "runs" / run) != "done":
            resume = ["--resume"] if (project / "runs" / run).exists() else []
            results.setdefault("seconds", {})[run] = kiwb(
                "train", project, "--run", run, "--method", "muki-hard", *options, *resume,
                "--foreground", log=log)["seconds"]
        results.setdefault("figures", {})[run] = evaluate(project, run, test, log,
                                                          evaluate_options)
    with Store(project / "store.sqlite") as store:
        for run in ("muki-hard", "muki-hard-from-merge"):
            results.setdefault("curves", {})[run] = {
                event["data"]["step"]: event["data"]["accuracy"]
                for event in store.events_after(run=run, kind="train.eval")}
    results["work_seconds"] = debian8._work_seconds(project)


def debian8_part(results: dict) -> None:
    preset = debian8.PRESETS["cpu"]
    out = HERE / "out" / "cpu"  # debian8.py's CPU run: its teachers and scored projects
    data = debian8.split_data(out, preset)
    base = debian8.minilm_path()
    teachers = debian8.make_teachers(out, data, base, preset, {})
    project, test_view = debian8.score_splits(out, data, teachers, base, preset, {})
    log = OUT / "debian8.log"
    part = results.setdefault("debian8", {})
    view = json.loads(kiwb("integrate", test_view, "--json", log=log)["stdout"])
    # the test view's pool is the test split, its gold labels in label_column
    part["test"] = {"ensemble": view["ensemble_accuracy"], "teachers": view["teacher_accuracy"]}
    kiwb("integrate", project, log=log)
    merge_rows(project, data["test"], log, part)
    students(project, data["test"], log, part)


def demo_part(results: dict) -> None:
    root = OUT / "demo"
    log = OUT / "demo.log"
    if read_best(root / "runs" / "muki-hard") is None:
        kiwb("demo", root, "--no-ui", log=log)
    part = results.setdefault("demo", {})
    demo = json.loads((root / "demo-results.json").read_text())
    part["test"] = {"ensemble": demo["ensemble"], "teachers": demo["teachers"]}
    merge_rows(root, None, log, part)
    students(root, None, log, part)


def ner_part(results: dict) -> None:
    root = HERE / "out" / "ner"  # ner_en.py's taggers, scored project and test split
    log = OUT / "ner.log"
    part = results.setdefault("ner", {})
    ner = json.loads((root / "results.json").read_text())
    part["students"] = {run: {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"]}
                        for run, report in ner["students"].items()}
    test = ner["test_integration"]["eval"]  # the same teachers on the same test split
    part["test"] = {"ensemble": test["ensemble_accuracy"], "teachers": test["teacher_accuracy"]}
    options = ("--tokens-column", "tokens", "--tags-column", "tags")
    merges = [entry for entry in MERGES if entry[0] in ("merge-average", "merge-ta-dev",
                                                        "merge-ties-dev")]
    for run, options_, _ in merges:
        if read_best(root / "project" / "runs" / run) is None:
            part.setdefault("seconds", {})[run] = kiwb(
                "merge", root / "project", "--run", run, *options_, "--foreground",
                log=log)["seconds"]
        part.setdefault("merges", {})[run] = json.loads(
            (root / "project" / "runs" / run / "manifest.json").read_text())["merge"]
        part.setdefault("figures", {})[run] = evaluate(root / "project", run,
                                                       root / "test.jsonl", log, options)


def render(results: dict) -> str:
    lines = []
    titles = {run: title for run, _, title in MERGES}
    for name, heading, where in (
            ("debian8", "debian-8 (preset cpu): two MiniLM teachers, 4 + 4 sections",
             "test accuracy (1,680 texts; merges chosen on dev, 400)"),
            ("demo", "The demo project (`kiwb demo`): two tiny BERT teachers, 4 + 4 topics",
             "accuracy on its 400 labeled eval texts (the dev-chosen rows are chosen on them "
             "too: optimistic)")):
        part = results.get(name)
        if not part or "figures" not in part:
            continue
        seconds = {**part.get("seconds", {})}
        lines += [f"### {heading}", "", f"{where}; wall time on this machine's 2 CPU cores.", "",
                  "| row | accuracy | macro-F1 | wall time to result |", "|---|---|---|---|"]
        for teacher, value in (part["test"].get("teachers") or {}).items():
            lines.append(f"| teacher {teacher} alone | {percent(value)} | | (trained once for "
                         "every row) |")
        lines.append(f"| Ensemble (no training) | {percent(part['test']['ensemble'])} | | "
                     f"scoring: {_seconds(part, 'score')} |")
        for run in titles:
            figures, record = part["figures"][run], part["merges"][run]
            chosen = _setting(record)
            lines.append(f"| merge: {titles[run]}{chosen} | {percent(figures['accuracy'])} | "
                         f"{percent(figures['macro_f1'])} | {_time(seconds.get(run), record)} |")
        for run, title in (("muki-hard", "MUKI-Hard, default routing"),
                           ("muki-hard-from-merge", f"MUKI-Hard from {part['best_merge']}")):
            figures = part["figures"][run]
            lines.append(f"| {title} | {percent(figures['accuracy'])} | "
                         f"{percent(figures['macro_f1'])} | scoring {_seconds(part, 'score')} "
                         f"+ training {_seconds(part, f'train_{run}')} |")
        curves = part.get("curves") or {}
        if curves.get("muki-hard") and curves.get("muki-hard-from-merge"):
            # steps are JSON keys (text) once the results file is read back
            steps = sorted(set(curves["muki-hard"]) & set(curves["muki-hard-from-merge"]),
                           key=int)
            lines += ["", "Eval accuracy during training (dev for debian-8), from the base and "
                      "from the merge:", "", "| step | " + " | ".join(map(str, steps)) + " |",
                      "|---|" + "---|" * len(steps)]
            for run in ("muki-hard", "muki-hard-from-merge"):
                lines.append(f"| {run} | " + " | ".join(
                    percent(curves[run][step]) for step in steps) + " |")
        lines.append("")
    ner = results.get("ner")
    if ner and "figures" in ner:
        lines += ["### ner-en: two MiniLM taggers (ner_en.py's), 2 + 2 entity types", "",
                  "Entity F1 on ner-en's test split; merges chosen on dev. The students are "
                  "ner_en.py's run of the same teachers on the same test split.", "",
                  "| row | entity F1 | macro-F1 |", "|---|---|---|"]
        for teacher, value in ner["test"]["teachers"].items():
            lines.append(f"| teacher {teacher} alone | {percent(value)} | |")
        lines.append(f"| Ensemble (no training) | {percent(ner['test']['ensemble'])} | |")
        for run, figures in ner["figures"].items():
            lines.append(f"| merge: {titles[run]}{_setting(ner['merges'][run])} | "
                         f"{percent(figures['accuracy'])} | {percent(figures['macro_f1'])} |")
        for run, figures in ner["students"].items():
            lines.append(f"| student {run} | {percent(figures['accuracy'])} | "
                         f"{percent(figures['macro_f1'])} |")
        lines.append("")
    return "\n".join(lines)


def _setting(record: dict) -> str:
    if record["chosen_on"] != "eval":
        return ""
    parts = [f"lambda {record['lambda']:g}"] + (
        [f"k {record['top_k']:g}%"] if record.get("top_k") is not None else [])
    return f" ({', '.join(parts)})"


def _seconds(part: dict, stage: str) -> str:
    value = (part.get("work_seconds") or {}).get(stage)
    return "–" if value is None else f"{value / 60:.1f} min" if value >= 60 else f"{value:.0f} s"


def _time(command_seconds: float | None, record: dict) -> str:
    """The merge's own wall time (the command's, with start-up, when this run made it)."""
    own = record.get("seconds")
    shown = f"{own:.0f} s" if own is not None else "–"
    return shown + (f" ({command_seconds:.0f} s with start-up)" if command_seconds else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "debian8", "demo", "ner"), default="all")
    parser.add_argument("--render", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    if not args.render:
        for name, run in (("demo", demo_part), ("debian8", debian8_part), ("ner", ner_part)):
            if args.part in ("all", name):
                run(results)
                path.write_text(json.dumps(results, indent=2))
    write_section("merge", "benchmarks/merge.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
