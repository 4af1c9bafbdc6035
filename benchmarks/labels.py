"""A simulated user labels conflicts on debian-8: is labeling the Conflicts list worth it?

    python benchmarks/labels.py --preset cpu               # routing, then the students
    python benchmarks/labels.py --preset cpu --no-students
    python benchmarks/labels.py --preset cpu --render      # the table again from labels.json

The user gives the gold label of the first 16, 64 and 256 texts the Conflicts pane offers in
its "most useful next" order (no margin ceiling), over the integration the project's default
settings make; the control labels as many pool texts drawn at random (seed 0). Each label set
goes into the store as the workbench would put it (kiwb.project.labels). Figures: routing
accuracy on dev and test of stacked routing fitted on the pool with those labels, and
MUKI-Hard students (`kiwb train --labels --routing stacked`, the workbench's re-integration)
evaluated on test. The lowest-margin order without spreading and the pane's own random sample
(content-hash order) are measured for routing only.
Uses the teachers and scores of `debian8.py` (copied, never rescored); on a fresh machine it
trains the teachers and scores the pool, dev and test itself, without the baselines' students.
Writes benchmarks/out/PRESET/labels.json and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
from routing import scores_of  # noqa: E402

from kiwb.core.choices import LABELS_ROUTING  # noqa: E402

COUNTS = (16, 64, 256)
# the few-label routings fitted on the labels; results of earlier runs also hold trust (removed
# from kiwb in issue 61: under stacked on every row), and their tables keep its column
ROUTINGS = ("stacked",)
SHOWN_ROUTINGS = ("stacked", "trust")
ORDERS = ("useful", "random", "sample", "margin")
STUDENT_ORDERS = ("useful", "random")
SEED = 0


def project_copy(out: Path, preset: dict) -> tuple[Path, dict]:
    """A project of its own (no [data.labeled]) over routing.py's scores, copied not redone."""
    base = debian8.minilm_path()
    data = debian8.split_data(out, preset)
    teachers = debian8.make_teachers(out, data, base, preset, {})
    debian8.score_splits(out, data, teachers, base, preset, {})  # cached after debian8.py
    project = out / "labels-project"
    if not (project / "store.sqlite").exists():
        project.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out / "project" / "scores", project / "scores", dirs_exist_ok=True)
        shutil.copy2(out / "project" / "store.sqlite", project / "store.sqlite")
    debian8.write_config(project, teachers, data["train"], data["dev"], base, preset,
                         label_unlabeled=True)
    debian8.kiwb("score", project, "--foreground", log=out / "commands.log")  # cached: a check
    return project, data


def offered_texts(project: Path, out: Path) -> dict[str, list[int]]:
    """Pool rows in the orders the pane offers them (useful, sample, margin) and a random order."""
    from kiwb.project.instances import InstanceFilter, page
    from kiwb.project.labels import replace_all
    from kiwb.project.store import Store

    with Store(project / "store.sqlite") as store:
        replace_all(store.connection, [])  # the pane's order, before any label
    said = json.loads(debian8.kiwb("integrate", project, "--json", log=out / "commands.log")["stdout"])
    limit = max(COUNTS)
    with Store(project / "store.sqlite") as store:
        orders = {order: [item.row for item in page(store.connection, said["key"],
                                                    InstanceFilter(order=order), limit=limit)]
                  for order in ("useful", "sample", "margin")}
    orders["random"] = random.Random(SEED).sample(range(said["num_texts"]), limit)
    orders["base_routing"] = said["routing"]["name"]
    return orders


def give(project: Path, texts: list[dict], rows: list[int]) -> None:
    from kiwb.project.labels import replace_all
    from kiwb.project.store import Store

    with Store(project / "store.sqlite") as store:
        replace_all(store.connection, [(texts[row]["text"], texts[row]["label"]) for row in rows])


def routing_figures(project: Path, test_view: Path, routing: str) -> dict:
    """Routing accuracy of `routing` fitted on the pool with the stored labels, on dev and test."""
    from kiwb.kinds.sequence.integration import (
        IntegrationSettings,
        integrate_pool,
        routing_accuracies,
    )
    from kiwb.project.config import load_config
    from kiwb.project.store import Store

    pool = scores_of(project, "unlabeled")
    texts = [json.loads(line)["text"] for line in open(load_config(project).resolve(
        load_config(project).data.unlabeled.path), encoding="utf-8")]
    with Store(project / "store.sqlite") as store:
        fitted = integrate_pool(IntegrationSettings(routing=routing, labels=True), store, pool,
                                texts, None).fitted
    splits = {"dev": scores_of(project, "eval"), "test": scores_of(test_view, "unlabeled")}
    return {name: routing_accuracies(scores, scores.true_label_ids(), fitted)["chosen"]
            for name, scores in splits.items()}


def student(project: Path, data: dict, out: Path, run: str, *options: str) -> dict:
    """Train MUKI-Hard as `run` with `options` (resumed or reused when there), then test it."""
    log = out / "commands.log"
    state = debian8._run_state(project / "runs" / run)
    stage = None
    if state != "done":
        resume = ("--resume",) if state == "partial" else ()
        stage = debian8.kiwb("train", project, "--run", run, *options, *resume, "--foreground",
                             log=log)
    report = json.loads(debian8.kiwb("evaluate", project, "--run", run, "--data", data["test"],
                                     "--json", log=log)["stdout"])
    return {"run": run, "accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
            "per_class": report["per_class_accuracy"],
            "seconds": stage["seconds"] if stage else None}


def render(results: dict) -> str:
    shown = [r for r in SHOWN_ROUTINGS
             if any(r in entry["routing"] for entry in results["figures"].values())]
    lines = [f"## Labeling conflicts on debian-8, preset `{results['preset']}`", "",
             "A simulated user gives the gold label of the first N texts the Conflicts pane offers "
             "(\"most useful next\", no margin ceiling, over the integration the default settings "
             f"make: {results['base_routing']} routing); the control labels N pool texts drawn at "
             f"random (seed {SEED}). Routing: {' and '.join(shown)} routing fitted on the pool with "
             "those labels; routing accuracy on dev / test (share of texts whose top-scored "
             "teacher knows the gold label). Students: MUKI-Hard, `kiwb train --labels --routing "
             f"{LABELS_ROUTING}`, 8-way test accuracy, one seed. \"lowest margin\" is the pane's "
             "margin order without spreading over teachers and classes, \"random sample\" the pane's "
             "sample order (content-hash order; both routing only).", "",
             "| labels | order | " + "".join(f"{r} routing dev / test (%) | " for r in shown)
             + "MUKI-Hard test (%) | macro-F1 (%) |", "|---|---|" + "---|" * (len(shown) + 2)]
    names = {"useful": "most useful next", "random": "random", "sample": "random sample",
             "margin": "lowest margin"}
    base = results.get("without_labels")
    if base:
        others = " – |" * (len(shown) - 1)  # the few-label routings need labels
        lines.append(f"| 0 | – ({results['base_routing']}) | {100 * base['dev']:.1f} / "
                     f"{100 * base['test']:.1f} |{others} {_student(results.get('base_student'))} |")
    for count in COUNTS:
        for order in ORDERS:
            entry = results["figures"].get(f"{order}-{count}")
            if entry is None:
                continue
            routed = " | ".join(f"{100 * entry['routing'][r]['dev']:.1f} / "
                                f"{100 * entry['routing'][r]['test']:.1f}" for r in shown)
            trained = (_student(entry.get("student")) if order in STUDENT_ORDERS
                       else "– | –")
            lines.append(f"| {count} | {names[order]} | {routed} | {trained} |")
    return "\n".join(lines) + "\n"


def _student(trained: dict | None) -> str:
    if not trained:
        return "not run | –"
    return f"{100 * trained['accuracy']:.1f} | {100 * trained['macro_f1']:.1f}"


def base_routing(project: Path, test_view: Path) -> dict:
    """The default label-free routing's accuracy on dev and test, for the 0-label row."""
    from kiwb.core import routing as routes
    from kiwb.core.choices import DEFAULT_ROUTING
    from kiwb.kinds.sequence.integration import routing_accuracies

    pool = scores_of(project, "unlabeled")
    fitted = routes.fit_routing(DEFAULT_ROUTING, pool.features(), teacher_names=pool.teachers)
    splits = {"dev": scores_of(project, "eval"), "test": scores_of(test_view, "unlabeled")}
    return {name: routing_accuracies(scores, scores.true_label_ids(), fitted)["chosen"]
            for name, scores in splits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=debian8.PRESETS, default="cpu")
    parser.add_argument("--no-students", action="store_true", help="routing figures only")
    parser.add_argument("--counts", default="64,256,16",
                        help="label counts to train students for, in this order")
    parser.add_argument("--render", action="store_true",
                        help="only re-render BENCHMARKS.md's section from labels.json")
    args = parser.parse_args()
    out = HERE / "out" / args.preset
    if args.render:
        from report import write_section

        write_section(f"labels {args.preset}", "benchmarks/labels.py",
                      render(json.loads((out / "labels.json").read_text())))
        return
    preset = debian8.PRESETS[args.preset]
    project, data = project_copy(out, preset)
    test_view = out / "test-view"
    pool = [json.loads(line) for line in open(data["train"], encoding="utf-8")]
    results_path = out / "labels.json"
    previous = json.loads(results_path.read_text()) if results_path.exists() else {}
    orders = offered_texts(project, out)
    results = {"preset": args.preset, "base_routing": orders["base_routing"],
               "without_labels": base_routing(project, test_view), "offered": {
                   order: orders[order] for order in ORDERS}, "figures": {}}
    for count in COUNTS:
        for order in ORDERS:
            give(project, pool, orders[order][:count])
            entry = {"routing": {routing: routing_figures(project, test_view, routing)
                                 for routing in ROUTINGS}}
            kept = previous.get("figures", {}).get(f"{order}-{count}", {}).get("student")
            if kept and previous.get("offered", {}).get(order) == orders[order]:
                entry["student"] = kept  # the same labels: the run evaluated before stands
            results["figures"][f"{order}-{count}"] = entry
    results_path.write_text(json.dumps(results, indent=2))
    print(render(results))
    if not args.no_students:
        for count in map(int, args.counts.split(",")):
            for order in STUDENT_ORDERS:
                entry = results["figures"][f"{order}-{count}"]
                if "student" in entry:
                    continue
                give(project, pool, orders[order][:count])
                entry["student"] = student(
                    project, data, out, f"muki-hard-{LABELS_ROUTING}-labels-{order}{count}-s0",
                    "--labels", "--routing", LABELS_ROUTING)
                results_path.write_text(json.dumps(results, indent=2))
                print(render(results), flush=True)
        # the same student without labels, default routing: what the labels are compared with
        results["base_student"] = previous.get("base_student") or student(
            project, data, out, "muki-hard-s0")
        results_path.write_text(json.dumps(results, indent=2))
    from report import write_section

    write_section(f"labels {args.preset}", "benchmarks/labels.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
