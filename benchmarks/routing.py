"""Routing on debian-8: which teacher knows each text, by every routing method kiwb has.

    python benchmarks/routing.py --preset cpu            # tables, then the students
    python benchmarks/routing.py --preset cpu --no-students

Uses the teachers and scores of `debian8.py` (same folder, same protocol; made when missing,
reused when there). Label-free routings are fitted on the student pool and measured on dev
and test; few-label routings are fitted on 16, 64 and 256 labeled texts drawn with a fixed
seed from the training rows outside the pool. The methods are compared on dev only: the best
label-free routing and the best routing with 64 labels (both by dev routing accuracy) then
train MUKI-Hard and MUKI-Soft students, evaluated on test. Writes
benchmarks/out/PRESET/routing.json and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8 and report live beside this script
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)

MIXTURES = ("mixture", "quantile-mixture", "joint-mixture")
# (routing, use_mc, feature set); the feature set matters only to the mixtures and trust
LABEL_FREE = [("confidence", True, None), ("confidence", False, None), ("rank", True, None),
              ("rank", False, None)] + [
    (routing, use_mc, features) for routing in MIXTURES for features in ("margin", "all")
    for use_mc in (True, False)]
FEW_LABEL = [("trust", use_mc, features) for features in ("margin", "all")
             for use_mc in (True, False)] + [("temperature", True, None)]
LABEL_COUNTS = (16, 64, 256)
STUDENT_LABELS = 64
LABEL_SEED = 0


def routing_name(routing: str, use_mc: bool, features: str | None) -> str:
    return routing + ("" if use_mc else " (plain)") + (f" [{features}]" if features else "")


def draw_labeled(out: Path, data: dict, count: int, seed: int) -> Path:
    """`count` training rows outside the student pool, in a seeded random order (a prefix of
    it is the smaller labeled set)."""
    pool = {json.loads(line)["text"] for line in open(data["train"], encoding="utf-8")}
    rows = [json.loads(line) for line in open(data["teacher_train"], encoding="utf-8")]
    candidates = [row for row in rows if row["text"] not in pool]
    chosen = random.Random(seed).sample(candidates, count)
    path = out / "labeled.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    return path


def scores_of(project: Path, role: str):
    from kiwb.project.config import load_config
    from kiwb.project.store import Store
    from kiwb.workers.integrate import scores_from_tasks
    from kiwb.workers.score import plan_scoring

    config = load_config(project)
    with Store(project / "store.sqlite") as store:
        tasks = [task for task in plan_scoring(config, store) if task.dataset == role]
        return scores_from_tasks(config, store, tasks)


def first_rows(scores, count: int):
    """The first `count` texts of a score set (the smaller labeled sets are prefixes)."""
    return dataclasses.replace(
        scores, mc_confidence=scores.mc_confidence[:count],
        det_confidence=scores.det_confidence[:count],
        mutual_information=scores.mutual_information[:count],
        det_probs=[p[:count] for p in scores.det_probs],
        det_logits=[p[:count] for p in scores.det_logits],
        mc_probs=[p[:count] for p in scores.mc_probs], true_labels=scores.true_labels[:count])


def measure(routing: str, use_mc: bool, features: str | None, pool, labeled, splits: dict) -> dict:
    """Routing accuracy of one fitted routing on each split, and who wins the test texts."""
    from kiwb.core import routing as routes
    from kiwb.workers.integrate import routing_accuracies

    fitted = routes.fit_routing(
        routing, pool.features(), use_mc=use_mc,
        feature_set=features or routes.DEFAULT_FEATURE_SET,
        labeled=labeled.labeled_features() if labeled is not None else None,
        teacher_names=pool.teachers)
    found = {name: routing_accuracies(scores, scores.true_label_ids(), fitted)["chosen"]
             for name, scores in splits.items()}
    routed = splits["test"].routing_scores(fitted).argmax(dim=1)
    found["test_wins"] = {teacher: int((routed == i).sum())
                          for i, teacher in enumerate(splits["test"].teachers)}
    found["share"] = {teacher: router.share for teacher, router in
                      zip(pool.teachers, fitted.routers, strict=True)}
    if routing == "temperature":
        found["temperature"] = {teacher: router.temperature for teacher, router in
                                zip(pool.teachers, fitted.routers, strict=True)}
    found.update(routing=routing, use_mc=use_mc, features=features)
    return found


def routing_tables(project: Path, test_view: Path, labeled_view: Path) -> dict:
    pool, labeled_all = scores_of(project, "unlabeled"), scores_of(labeled_view, "unlabeled")
    splits = {"dev": scores_of(project, "eval"), "test": scores_of(test_view, "unlabeled")}
    tables = {"label_free": {}, "few_label": {}}
    for routing, use_mc, features in LABEL_FREE:
        tables["label_free"][routing_name(routing, use_mc, features)] = measure(
            routing, use_mc, features, pool, None, splits)
    for routing, use_mc, features in FEW_LABEL:
        for count in LABEL_COUNTS:
            tables["few_label"].setdefault(routing_name(routing, use_mc, features), {})[str(count)] = \
                measure(routing, use_mc, features, pool, first_rows(labeled_all, count), splits)
    return tables


def best_on_dev(entries: dict) -> str:
    return max(entries, key=lambda name: entries[name]["dev"])


def students(out: Path, project: Path, data: dict, teachers: dict, base: str, preset: dict,
             labeled: Path, tables: dict, seeds: int, methods: list[str], results: dict,
             results_path: Path) -> None:
    """MUKI-Hard and -Soft with the best label-free routing and with the best 64-label one."""
    from kiwb.core.routing import DEFAULT_FEATURE_SET

    log = out / "commands.log"
    # `kiwb train` reads the default feature set, so the students use routings measured with it
    usable = lambda entry: entry["features"] in (None, DEFAULT_FEATURE_SET)  # noqa: E731
    free = best_on_dev({name: entry for name, entry in tables["label_free"].items() if usable(entry)})
    few_label = {name: by_count[str(STUDENT_LABELS)] for name, by_count in tables["few_label"].items()
                 if usable(by_count[str(STUDENT_LABELS)])}
    few = best_on_dev(few_label)
    chosen = [(free, tables["label_free"][free], ()), (few, few_label[few], ("labeled",))]
    results["students_chosen"] = {"label_free": free, f"{STUDENT_LABELS}_labels": few}
    debian8.write_config(project, teachers, data["train"], data["dev"], base, preset,
                         label_unlabeled=True)
    config = project / "kiwb.toml"
    config.write_text(config.read_text() + f'[data.labeled]\npath = "{labeled}"\n'
                      f'label_column = "label"\nlimit = {STUDENT_LABELS}\n')
    debian8.kiwb("score", project, "--foreground", log=log)  # the 64 labeled texts only
    for seed in range(seeds):
        text = config.read_text()
        lines = [line for line in text.splitlines() if not line.startswith("seed = ")]
        # the seed belongs to [training]: put it right after that section's header
        at = lines.index("[training]") + 1
        config.write_text("\n".join(lines[:at] + [f"seed = {seed}"] + lines[at:]) + "\n")
        for name, entry, _uses in chosen:
            routing, use_mc = entry["routing"], entry["use_mc"]
            for method in methods:
                run = f"{method}-{routing}{'' if use_mc else '-no-mc'}"
                run += f"-{STUDENT_LABELS}labels" if _uses else ""
                run += f"-s{seed}"
                state = debian8._run_state(project / "runs" / run)
                if state != "done":
                    resume = ("--resume",) if state == "partial" else ()
                    extra = () if use_mc else ("--no-mc",)
                    results.setdefault("stages", {})[f"train_{run}"] = debian8.kiwb(
                        "train", project, "--run", run, "--method", method, "--routing", routing,
                        *extra, *resume, "--foreground", log=log)
                report = json.loads(debian8.kiwb("evaluate", project, "--run", run, "--data",
                                                 data["test"], "--json", log=log)["stdout"])
                key = f"{method} · {name}" + (f" · {STUDENT_LABELS} labels" if _uses else "")
                seeds_of = results.setdefault("students", {}).setdefault(key, [])
                seeds_of[:] = [entry for entry in seeds_of if entry["run"] != run] + [
                    {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
                     "per_class": report["per_class_accuracy"], "run": run}]
                results_path.write_text(json.dumps(results, indent=2))


def render(results: dict) -> str:
    tables = results["tables"]
    lines = [f"## Routing on debian-8, preset `{results['preset']}`", "",
             "Routing accuracy: share of texts whose top-scored teacher knows the gold label. "
             "Label-free routings are fitted on the 2,000-text student pool; few-label ones on the "
             f"first 16, 64 or 256 of {max(LABEL_COUNTS)} labeled training texts outside the pool "
             f"(seed {LABEL_SEED}). Methods are chosen on dev; test is reported.", "",
             "### Label-free", "",
             "| routing | dev (%) | test (%) | test texts routed to A / B | est. share in A / B |",
             "|---|---|---|---|---|"]
    for name, entry in tables["label_free"].items():
        wins = " / ".join(f"{v:,}" for v in entry["test_wins"].values())
        share = " / ".join("–" if v is None else f"{100 * v:.0f}%" for v in entry["share"].values())
        lines.append(f"| {name} | {100 * entry['dev']:.1f} | {100 * entry['test']:.1f} | {wins} | {share} |")
    counts = list(next(iter(tables["few_label"].values())))
    lines += ["", "### Few labels", "",
              "| routing | " + " | ".join(f"{c} labels: dev / test (%)" for c in counts) + " |",
              "|---|" + "---|" * len(counts)]
    for name, by_count in tables["few_label"].items():
        cells = [f"{100 * by_count[c]['dev']:.1f} / {100 * by_count[c]['test']:.1f}" for c in counts]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if results.get("students"):
        lines += ["", "### Students (8-way test accuracy)", "",
                  "| student · routing | test accuracy (%) | macro-F1 (%) | seeds |", "|---|---|---|---|"]
        for key, runs in results["students"].items():
            accuracy = sum(r["accuracy"] for r in runs) / len(runs)
            f1 = sum(r["macro_f1"] for r in runs) / len(runs)
            lines.append(f"| {key} | {100 * accuracy:.1f} | {100 * f1:.1f} | {len(runs)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=debian8.PRESETS, default="cpu")
    parser.add_argument("--seeds", type=int, default=1, help="student seeds")
    parser.add_argument("--no-students", action="store_true", help="routing tables only")
    parser.add_argument("--methods", default="muki-hard,muki-soft",
                        help="student methods, comma-separated, in the order to train them")
    args = parser.parse_args()
    preset = debian8.PRESETS[args.preset]
    out = HERE / "out" / args.preset
    out.mkdir(parents=True, exist_ok=True)
    base = debian8.minilm_path()
    data = debian8.split_data(out, preset)
    log = out / "commands.log"
    teachers = debian8.make_teachers(out, data, base, preset, {})
    project, test_view, labeled_view = out / "project", out / "test-view", out / "labeled-view"
    labeled = draw_labeled(out, data, max(LABEL_COUNTS), LABEL_SEED)
    debian8.write_config(project, teachers, data["train"], data["dev"], base, preset, label_unlabeled=True)
    debian8.write_config(test_view, teachers, data["test"], None, base, preset, label_unlabeled=True)
    debian8.write_config(labeled_view, teachers, labeled, None, base, preset, label_unlabeled=True)
    for folder in (project, test_view, labeled_view):
        debian8.kiwb("score", folder, "--foreground", log=log)  # cached where done
    results_path = out / "routing.json"
    previous = json.loads(results_path.read_text()) if results_path.exists() else {}
    # students evaluated by an earlier run (other methods or seeds) stay in the table
    results = {"preset": args.preset, "labeled_seed": LABEL_SEED,
               "tables": routing_tables(project, test_view, labeled_view),
               "students": previous.get("students", {}), "stages": previous.get("stages", {})}
    results_path.write_text(json.dumps(results, indent=2))
    print(render(results))
    if not args.no_students:
        students(out, project, data, teachers, base, preset, labeled, results["tables"], args.seeds,
                 args.methods.split(","), results, results_path)
    from report import write_section

    write_section(f"routing {args.preset}", "benchmarks/routing.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
