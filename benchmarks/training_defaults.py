"""Training defaults: does a student learn with kiwb's defaults, on small and large pools?

    python benchmarks/training_defaults.py                  # demo, debian-8 500 and 2,000
    python benchmarks/training_defaults.py --pools demo     # the demo only (minutes)

Trains MUKI-Hard (default routing) with each set of [training] settings:
  old   the paper's recipe, kiwb's defaults before: 3 epochs, lr 2e-5, batch 32, no minimum
  new   kiwb's defaults now (min_steps, learning_rate = "auto")
  hand  what the demo set by hand before (20 epochs, lr 2e-3); demo only
on the demo (150 pool texts, 50 labeled eval texts: its only labeled set), and on debian-8
with the cpu preset's teachers and scores (`debian8.py`): the 2,000-text pool and its first
500 texts, evaluated on dev (400, the run's eval set) and test (1,680). Reports accuracy,
macro-F1, the classes never predicted on test, and kiwb's own verdict (the learning check
of the kept checkpoint). Writes benchmarks/out/cpu/training_defaults.json and the
"training defaults" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8 and report live beside this script
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)

OLD = {"epochs": 3.0, "learning_rate": 2e-5, "batch_size": 32, "min_steps": 0}
VARIANTS = {
    "old": OLD,
    "new": {},  # every [training] key below at its default
    "hand": {"epochs": 20.0, "learning_rate": 2e-3, "batch_size": 32, "min_steps": 0},
}
RESET = ("epochs", "learning_rate", "batch_size", "min_steps")
POOLS = ("demo", "500", "2000")
OUT = HERE / "out" / "cpu"


def set_training(project: Path, variant: str) -> None:
    """Rewrite the project's [training] with the variant's settings (the rest at default)."""
    from kiwb.project.atomic import atomic_write_text
    from kiwb.project.config import TrainingConfig, load_config, render_config

    config = load_config(project)
    defaults = {name: getattr(TrainingConfig(), name) for name in RESET}
    training = dataclasses.replace(config.training, **{**defaults, **VARIANTS[variant]})
    atomic_write_text(config.file, render_config(dataclasses.replace(config, training=training)))


def demo_project() -> Path:
    """The full demo, built (or reused) by `kiwb demo`."""
    root = OUT / "demo"
    debian8.kiwb("demo", root, "--no-ui", log=OUT / "commands.log")
    return root


def debian_project(pool: int) -> tuple[Path, dict]:
    """debian-8's cpu project restricted to the first `pool` texts; the scores of the
    routing benchmark's project are copied in, so only new texts are scored."""
    preset = debian8.PRESETS["cpu"]
    data = debian8.split_data(OUT, preset)
    teachers = debian8.make_teachers(OUT, data, debian8.minilm_path(), preset, {})
    project = OUT / f"defaults-{pool}"
    source = OUT / "project"
    if not (project / "store.sqlite").exists() and (source / "store.sqlite").exists():
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / "store.sqlite", project / "store.sqlite")
        shutil.copytree(source / "scores", project / "scores", dirs_exist_ok=True)
    debian8.write_config(project, teachers, data["train"], data["dev"], debian8.minilm_path(),
                         preset, label_unlabeled=True)
    if pool < preset["train"]:
        config = project / "kiwb.toml"
        config.write_text(config.read_text().replace(
            f'path = "{data["train"]}"\n', f'path = "{data["train"]}"\nlimit = {pool}\n', 1))
    debian8.kiwb("score", project, "--foreground", log=OUT / "commands.log")
    return project, data


def verdict(project: Path, run: str) -> dict:
    """The learning check, steps and learning rate the run's job recorded at its end."""
    from kiwb.project.store import Store

    with Store(project / "store.sqlite") as store:
        jobs = [job for job in store.jobs.all() if job.kind == "train" and job.run == run]
        ending = (jobs[-1].ending or {}) if jobs else {}
    return {"check": ending.get("check"), "steps": ending.get("step"),
            "learning_rate": ending.get("learning_rate")}


def train_and_evaluate(project: Path, variant: str, tests: dict[str, Path | None]) -> dict:
    run = f"defaults-{variant}"
    log = OUT / "commands.log"
    set_training(project, variant)
    state = debian8._run_state(project / "runs" / run)
    stage = None
    if state != "done":
        resume = ("--resume",) if state == "partial" else ()
        stage = debian8.kiwb("train", project, "--run", run, "--method", "muki-hard", *resume,
                             "--foreground", log=log)
    entry = {"run": run, "seconds": stage and stage["seconds"], **verdict(project, run)}
    for split, path in tests.items():
        extra = ("--data", path) if path is not None else ()
        report = json.loads(debian8.kiwb("evaluate", project, "--run", run, *extra, "--json",
                                         log=log)["stdout"])
        confusion = report["confusion"]
        never = [label for i, label in enumerate(report["per_class_accuracy"])
                 if sum(row[i] for row in confusion) == 0]
        entry[split] = {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
                        "never_predicted": never}
    return entry


def ensembles(project: Path, data: dict | None) -> dict:
    """The untrained Ensemble's accuracy on the eval set (and on test for debian-8)."""
    sys.path.insert(0, str(HERE))
    from routing import scores_of

    from kiwb.kinds.sequence.integration import ensemble_accuracy

    result = {"eval": ensemble_accuracy(scores_of(project, "eval"))}
    if data is not None:
        result["test"] = ensemble_accuracy(scores_of(OUT / "test-view", "unlabeled"))
    return result


def render(results: dict) -> str:
    lines = [
        "MUKI-Hard (default routing), one seed, on the cpu preset's machine. `old`: 3 epochs, "
        "lr 2e-5, batch 32 (the paper's recipe and kiwb's defaults before); `new`: kiwb's "
        "defaults now; `hand`: the demo's hand-set recipe before. Steps: optimizer steps "
        "run. Verdict: kiwb's learning check on the kept checkpoint (eval set). Never "
        "predicted: classes with no prediction on the reported split.",
        "",
        "| pool | settings | steps | lr | eval acc | eval macro-F1 | test acc | test macro-F1 | "
        "never predicted (test) | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for pool, entry in results["pools"].items():
        for variant, run in entry["runs"].items():
            test = run.get("test") or {}
            check = run.get("check") or {}
            lr = f"{run['learning_rate']:.1e}" if run.get("learning_rate") else "–"
            lines.append(
                f"| {pool} | {variant} | {run.get('steps') or '–'} | {lr} | "
                f"{_pct(run['eval']['accuracy'])} | {_pct(run['eval']['macro_f1'])} | "
                f"{_pct(test.get('accuracy'))} | {_pct(test.get('macro_f1'))} | "
                f"{', '.join((test or run['eval'])['never_predicted']) or 'none'} | "
                f"{check.get('status', '–')} |")
        ensemble = entry["ensemble"]
        lines.append(f"| {pool} | Ensemble (untrained) | | | {_pct(ensemble['eval'])} | | "
                     f"{_pct(ensemble.get('test'))} | | | |")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", default=",".join(POOLS), help="comma-separated: demo, 500, 2000")
    parser.add_argument("--report", action="store_true",
                        help="only write BENCHMARKS.md's section from the results file")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "training_defaults.json"
    results = json.loads(path.read_text()) if path.exists() else {"pools": {}}
    for pool in [] if args.report else args.pools.split(","):
        if pool == "demo":
            project, data, variants = demo_project(), None, ("old", "new", "hand")
            tests = {"eval": None}
        else:
            (project, data), variants = debian_project(int(pool)), ("old", "new")
            tests = {"eval": None, "test": data["test"]}
        entry = results["pools"].setdefault(f"debian-8 {pool}" if data else "demo",
                                            {"runs": {}})
        entry["ensemble"] = ensembles(project, data)
        for variant in variants:
            run = train_and_evaluate(project, variant, tests)
            entry["runs"][variant] = run
            path.write_text(json.dumps(results, indent=2))
            print(render(results), flush=True)
    from report import write_section

    write_section("training defaults", "benchmarks/training_defaults.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
