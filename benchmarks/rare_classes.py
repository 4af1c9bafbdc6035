"""Rare classes on debian-8: where a class is lost, and which correction keeps it.

    python benchmarks/rare_classes.py                  # integration figures, then the students
    python benchmarks/rare_classes.py --no-students    # integration figures only (minutes)
    python benchmarks/rare_classes.py --seeds 2        # a second seed of every student
    python benchmarks/rare_classes.py --demo PATH      # the variants on the demo (minutes)
    python benchmarks/rare_classes.py --render         # the tables again from the results file

Uses the cpu preset of `debian8.py` (its teachers and scores: made when missing, reused when
there) in a project of its own with kiwb's default training (at least 300 steps, the automatic
learning rate), evaluated on dev during training (the run's eval set: the kept checkpoint is
the best on dev) and on test after. Variants, each with MUKI-Hard and MUKI-Soft and the default
routing otherwise (MUKI-Soft students for the defaults and MUKI-Hard's choice only):

  default      kiwb's defaults before this benchmark
  prior        prior correction: the targets' class mix matched to the pool's as estimated
               (measured here; it lost on dev, and kiwb no longer has it)
  logit        logit adjustment 1: the loss reads the logits plus log(the targets' mix)
               (measured here; it lost on dev, and kiwb no longer has it)
  class-rank   --routing class-rank: each teacher ranked among its own answers of each class
  weights      --class-weighting 0.5: texts weighed by 1 / sqrt(their target class's share)

First, for every variant, the integration alone on dev and test (no student): the class funnel
(owner, routing and target recall of each class) and the targets' accuracy and macro-F1. Then
the students. Chosen on dev (student macro-F1 at the kept checkpoint, accuracy on ties),
reported on test. Writes benchmarks/out/cpu/rare_classes.json and the "Rare classes" section
of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8, report and routing live beside this script
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
from report import percent, write_section  # noqa: E402

from kiwb.project.run_folder import read_best  # noqa: E402

OUT = HERE / "out" / "cpu"
RESULTS = OUT / "rare_classes.json"
VARIANTS = {  # in the order the students train: the likeliest winners on a tiny probe first
    "default": [],
    "weights": ["--class-weighting", "0.5"],
    "class-rank": ["--routing", "class-rank"],
}
METHODS = ("muki-hard", "muki-soft")
RARE = "mail"


def project() -> tuple[Path, Path, dict]:
    """The rare-classes project (pool 2,000, dev as eval) with default training, and the test
    view; scores are copied from debian8.py's project, never redone."""
    from kiwb.project.atomic import atomic_write_text
    from kiwb.project.config import TrainingConfig, load_config, render_config

    preset = debian8.PRESETS["cpu"]
    base = debian8.minilm_path()
    data = debian8.split_data(OUT, preset)
    teachers = debian8.make_teachers(OUT, data, base, preset, {})
    debian8.score_splits(OUT, data, teachers, base, preset, {})  # cached after debian8.py
    folder = OUT / "rare-project"
    if not (folder / "store.sqlite").exists():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(OUT / "project" / "scores", folder / "scores", dirs_exist_ok=True)
        shutil.copy2(OUT / "project" / "store.sqlite", folder / "store.sqlite")
    debian8.write_config(folder, teachers, data["train"], data["dev"], base, preset,
                         label_unlabeled=True)
    config = load_config(folder)  # kiwb's default training, but the preset's evaluations
    defaults = TrainingConfig(student=config.training.student, eval_every=preset["eval_every"],
                              max_length=config.training.max_length)
    atomic_write_text(config.file, render_config(config.__class__(**{
        **{name: getattr(config, name) for name in config.__dataclass_fields__},
        "training": defaults})))
    debian8.kiwb("score", folder, "--foreground", log=OUT / "commands.log")  # cached: a check
    return folder, OUT / "test-view", data


def settings_of(method: str, variant: str):
    from kiwb.project.records import IntegrationSettings

    options = dict(zip(VARIANTS[variant][::2], VARIANTS[variant][1::2], strict=False))
    return IntegrationSettings(
        method=method,
        routing=options.get("--routing", "rank"),
        class_weighting=float(options.get("--class-weighting", 0)))


def integration_figures(folder: Path, test_view: Path) -> dict:
    """Per variant and method, the integration alone on dev and test: the class funnel and
    the targets' own accuracy and macro-F1 (what a student would learn at best)."""
    from routing import scores_of

    from kiwb.core.class_funnel import target_top_classes
    from kiwb.core.metrics import classification_report
    from kiwb.kinds.sequence.integration import class_funnel_of, integrate_pool
    from kiwb.project.store import Store

    pool = scores_of(folder, "unlabeled")
    texts = [json.loads(line)["text"] for line in open(OUT / "train.jsonl", encoding="utf-8")]
    splits = {"dev": scores_of(folder, "eval"), "test": scores_of(test_view, "unlabeled")}
    found = {}
    with Store(folder / "store.sqlite") as store:
        for variant in VARIANTS:
            for method in METHODS:
                settings = settings_of(method, variant)
                targets = integrate_pool(settings, store, pool, texts, None)
                entry = {}
                for split, scores in splits.items():
                    funnel = class_funnel_of(pool, targets, settings, scores)
                    result = scores.integrate(settings, targets.fitted)
                    report = classification_report(target_top_classes(result.targets),
                                                   scores.true_label_ids(), scores.labels)
                    entry[split] = {"funnel": funnel.to_dict(), "accuracy": report["accuracy"],
                                    "macro_f1": report["macro_f1"],
                                    "per_class": report["per_class_accuracy"]}
                entry["pool_target_share"] = dict(zip(pool.labels, funnel.target_share,
                                                      strict=True))
                entry["estimated_share"] = dict(zip(pool.labels, funnel.estimated_share,
                                                    strict=True))
                found[f"{variant}/{method}"] = entry
                print(f"{variant} {method}: targets dev {entry['dev']['accuracy']:.3f} "
                      f"macro-F1 {entry['dev']['macro_f1']:.3f}", flush=True)
    return found


def student(folder: Path, data: dict, run: str, options: list[str], seed: int) -> dict:
    """Train `run` (resumed or reused when there), then its dev figures at the kept step and
    its test figures."""
    log = OUT / "commands.log"
    config = folder / "kiwb.toml"
    text = config.read_text()
    lines = [line for line in text.splitlines() if not line.startswith("seed = ")]
    at = lines.index("[training]") + 1
    config.write_text("\n".join(lines[:at] + [f"seed = {seed}"] + lines[at:]) + "\n")
    state = debian8._run_state(folder / "runs" / run)
    seconds = None
    if state != "done":
        resume = ["--resume"] if state == "partial" else []
        seconds = debian8.kiwb("train", folder, "--run", run, *options, *resume, "--foreground",
                               log=log)["seconds"]
    best = read_best(folder / "runs" / run)
    test = json.loads(debian8.kiwb("evaluate", folder, "--run", run, "--data", data["test"],
                                   "--json", log=log)["stdout"])
    dev = best["metrics"]
    return {"seconds": seconds, "step": best.get("step"),
            "dev": {key: dev.get(key) for key in ("accuracy", "macro_f1", "per_class_accuracy")},
            "test": {key: test[key] for key in ("accuracy", "macro_f1", "per_class_accuracy")}}


def students(folder: Path, data: dict, seeds: int, results: dict) -> None:
    """MUKI-Hard for every variant; MUKI-Soft for the defaults and for the variant MUKI-Hard
    chose on dev (each student costs 8-25 minutes of this CPU)."""
    for seed in range(seeds):
        for variant in VARIANTS:
            train_one(folder, data, variant, "muki-hard", seed, results)
        chosen = chosen_on_dev(results)["muki-hard"]
        for variant in dict.fromkeys(("default", chosen)):
            train_one(folder, data, variant, "muki-soft", seed, results)


def train_one(folder: Path, data: dict, variant: str, method: str, seed: int,
              results: dict) -> None:
    run = f"rare-{variant}-{method}-s{seed}"
    found = student(folder, data, run, ["--method", method, *VARIANTS[variant]], seed)
    results.setdefault("students", {}).setdefault(f"{variant}/{method}", {})[str(seed)] = found
    RESULTS.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"{run}: dev macro-F1 {found['dev']['macro_f1']:.3f}, test accuracy "
          f"{found['test']['accuracy']:.3f} macro-F1 {found['test']['macro_f1']:.3f}", flush=True)


def demo_figures(folder: Path) -> dict:
    """The defaults rule's other half: each variant's MUKI-Hard and MUKI-Soft on the demo
    (its eval set, the kept checkpoint), beside the demo's own settings."""
    log = OUT / "commands.log"
    if not (folder / "store.sqlite").exists():
        debian8.kiwb("demo", folder, "--no-ui", log=log)
    found = {}
    for variant, options in VARIANTS.items():
        for method in METHODS:
            run = f"rare-{variant}-{method}"
            if debian8._run_state(folder / "runs" / run) != "done":
                debian8.kiwb("train", folder, "--run", run, "--method", method, *options,
                             "--foreground", log=log)
            best = read_best(folder / "runs" / run)
            found[f"{variant}/{method}"] = {key: best["metrics"][key] for key in
                                            ("accuracy", "macro_f1", "per_class_accuracy")}
    return found


def mean(values: list[float | None]) -> float | None:
    values = [value for value in values if value is not None]
    return statistics.fmean(values) if values else None


def student_means(results: dict, key: str, split: str, figure: str) -> float | None:
    runs = results.get("students", {}).get(key, {})
    return mean([run[split][figure] for run in runs.values()])


def chosen_on_dev(results: dict) -> dict[str, str]:
    """Per method, the variant with the best dev macro-F1 (then dev accuracy)."""
    chosen = {}
    for method in METHODS:
        scored = [(student_means(results, f"{variant}/{method}", "dev", "macro_f1"),
                   student_means(results, f"{variant}/{method}", "dev", "accuracy"), variant)
                  for variant in VARIANTS if f"{variant}/{method}" in results.get("students", {})]
        if scored:
            chosen[method] = max(scored, key=lambda item: (item[0] or 0, item[1] or 0))[2]
    return chosen


def demo_rows(results: dict) -> list[str]:
    demo = results.get("demo")
    if not demo:
        return []
    lines = ["", "### The demo (eval set, 400 texts, balanced classes)", "",
             "| variant | MUKI-Hard acc. | MUKI-Hard macro-F1 | MUKI-Soft acc. | "
             "MUKI-Soft macro-F1 |", "|---|---:|---:|---:|---:|"]
    for variant in VARIANTS:
        hard, soft = demo[f"{variant}/muki-hard"], demo[f"{variant}/muki-soft"]
        lines.append(f"| {variant} | {percent(hard['accuracy'])} | {percent(hard['macro_f1'])} | "
                     f"{percent(soft['accuracy'])} | {percent(soft['macro_f1'])} |")
    return lines


def render(results: dict) -> list[str]:
    lines = ["### Integration alone: the targets on dev and test",
             "", "What each variant's targets would teach (no student): their accuracy and "
             f"macro-F1 against the gold labels, and the funnel of `{RARE}` on test (share of its "
             "texts an owner says it / routed to an owner saying it / target carries it), with "
             "its share of the pool's targets against the estimated share.", "",
             "| variant | method | dev acc. | dev macro-F1 | test acc. | test macro-F1 | "
             f"{RARE} on test: owner / routed / target | {RARE}: targets / estimated |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for key, entry in results["integration"].items():
        variant, method = key.split("/")
        funnel = entry["test"]["funnel"]
        index = funnel["labels"].index(RARE)
        labeled = funnel["labeled"]
        steps = " / ".join(percent(labeled[name][index]) for name in
                           ("owner_recall", "routed_recall", "target_recall"))
        lines.append(
            f"| {variant} | {method} | {percent(entry['dev']['accuracy'])} | "
            f"{percent(entry['dev']['macro_f1'])} | {percent(entry['test']['accuracy'])} | "
            f"{percent(entry['test']['macro_f1'])} | {steps} | "
            f"{percent(entry['pool_target_share'][RARE])}% / {percent(entry['estimated_share'][RARE])}% |")
    if results.get("students"):
        chosen = chosen_on_dev(results)
        labels = list(next(iter(results["integration"].values()))["test"]["per_class"])
        lines += ["", "### Students (default training), dev and test", "",
                  "Mean over the seeds run (count in the last column). Chosen on dev (macro-F1): "
                  + ", ".join(f"{method} **{variant}**" for method, variant in chosen.items())
                  + ".", "",
                  "| variant | method | dev acc. | dev macro-F1 | test acc. | test macro-F1 | "
                  + " | ".join(f"test {label}" for label in labels) + " | seeds |",
                  "|---|---|---:|---:|---:|---:|" + "---:|" * len(labels) + "---:|"]
        for key, runs in results["students"].items():
            variant, method = key.split("/")
            per_class = [mean([run["test"]["per_class_accuracy"].get(label) for run in
                               runs.values()]) for label in labels]
            lines.append(
                f"| {variant} | {method} | {percent(student_means(results, key, 'dev', 'accuracy'))} | "
                f"{percent(student_means(results, key, 'dev', 'macro_f1'))} | "
                f"{percent(student_means(results, key, 'test', 'accuracy'))} | "
                f"{percent(student_means(results, key, 'test', 'macro_f1'))} | "
                + " | ".join(percent(value) for value in per_class) + f" | {len(runs)} |")
    return lines + demo_rows(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="the tables from the results file")
    parser.add_argument("--no-students", action="store_true", help="integration figures only")
    parser.add_argument("--seeds", type=int, default=1, help="student seeds per variant")
    parser.add_argument("--demo", type=Path, metavar="PATH",
                        help="only the variants on the demo project at PATH (built if missing)")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else {}
    if args.demo:
        results["demo"] = demo_figures(args.demo)
        RESULTS.write_text(json.dumps(results, indent=2), encoding="utf-8")
    elif not args.render:
        folder, test_view, data = project()
        results["machine"] = debian8.machine()
        results["integration"] = integration_figures(folder, test_view)
        RESULTS.write_text(json.dumps(results, indent=2), encoding="utf-8")
        if not args.no_students:
            students(folder, data, args.seeds, results)
    rendered = "\n".join(render(results))
    write_section("rare classes", "benchmarks/rare_classes.py", rendered)
    print(rendered)


if __name__ == "__main__":
    main()
