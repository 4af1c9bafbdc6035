"""Dropout for teachers without it (issue 45): debian-8's two MiniLM teachers, their dropout
switched off at load, scored with kiwb's injected dropout at several rates.

    python benchmarks/dropout_injection.py                # the dev sweep and its tables
    python benchmarks/dropout_injection.py --students     # then MUKI-Hard students on test

Uses the teachers, splits and scores of `debian8.py` / `routing.py` (preset cpu; made when
missing, reused when there). A dropout-free teacher here is a copy of a MiniLM teacher whose
config.json sets every dropout rate to 0: what ModernBERT, Qwen and Llama classifiers are as
published, with a native behaviour (MiniLM's own 0.1) to compare against. Each rate scores the
first POOL_TEXTS texts of the student pool (the rank routing's quantiles are fitted there) and
dev at K = 16; the native teachers' scores of the same texts come from debian8's project, and a
second MC seed of them measures how much routing moves from the dropout draws alone. Mixed
pairs (one teacher native, the other injected) combine the two score sets per teacher. Rates are
compared on dev; test is reported for the rate chosen. Writes benchmarks/out/cpu/dropout.json
and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8 and report live beside this script
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
import representation_routing as representations  # noqa: E402

POOL_TEXTS = 600
RATES = (0.05, 0.2, 0.3)  # 0.1 is MiniLM's own: the native scores
NATIVE_RATE = 0.1
ROUTINGS = ("confidence", "rank")  # confidence compares raw figures across teachers; rank, quantiles
SECOND_SEED = 1


def dropout_off_copy(teacher: Path, folder: Path) -> Path:
    """`teacher` with every dropout rate of its config.json set to 0 (its weights linked)."""
    from kiwb.project.dropout_rates import injected_dropout

    folder.mkdir(parents=True, exist_ok=True)
    for item in teacher.iterdir():
        target = folder / item.name
        if item.name != "config.json" and not target.exists():
            target.symlink_to(item.resolve())
    config = json.loads((teacher / "config.json").read_text())
    config.update(injected_dropout(config, 0.0))
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def write_project(folder: Path, teachers: dict, pool: Path, data: dict, *,
                  dropout: float | str | None = None, seed: int = 0) -> Path:
    """debian8's project settings, on the pool's first texts and dev, with a [scoring] dropout
    and MC seed."""
    preset = debian8.PRESETS["cpu"]
    debian8.write_config(folder, teachers, pool, data["dev"], debian8.minilm_path(), preset,
                         label_unlabeled=True)
    config = folder / "kiwb.toml"
    text = config.read_text()
    extra = (f'dropout = {json.dumps(dropout)}\n' if dropout is not None else "") + f"seed = {seed}\n"
    config.write_text(text.replace("[scoring]\n", "[scoring]\n" + extra, 1))
    return folder


def scores(project: Path, role: str, count: int | None = None):
    """A project's stored scores of one data set (its first `count` texts)."""
    found = representations.scores_of(project, role, representation=False)
    if count is None:
        return found
    from routing import first_rows

    return first_rows(found, count)


def mixed(first, second, taken_from_second: int):
    """The scores of `first` with teacher `taken_from_second`'s columns from `second`."""
    import torch

    def column(a, b):
        merged = a.clone()
        merged[:, taken_from_second] = b[:, taken_from_second]
        return merged

    def teacherwise(a, b):
        return [b[i] if i == taken_from_second else a[i] for i in range(len(a))]

    return dataclasses.replace(
        first, mc_confidence=column(first.mc_confidence, second.mc_confidence),
        mutual_information=column(first.mutual_information, second.mutual_information),
        mc_probs=teacherwise(first.mc_probs, second.mc_probs),
        det_probs=teacherwise(first.det_probs, second.det_probs),
        det_logits=teacherwise(first.det_logits, second.det_logits),
        det_confidence=torch.clone(first.det_confidence))


def routed(pool, splits: dict, routing: str, use_mc: bool) -> dict:
    """Routing accuracy on each split of one routing fitted on `pool`, and the share of each
    split's texts routed to each teacher."""
    from kiwb.core import routing as routes
    from kiwb.kinds.sequence.integration import routing_accuracies

    fitted = routes.fit_routing(routing, pool.features(), use_mc=use_mc, teacher_names=pool.teachers)
    found = {}
    for name, split in splits.items():
        found[name] = routing_accuracies(split, split.true_label_ids(), fitted)["chosen"]
        wins = split.routing_scores(fitted).argmax(dim=1)
        found[f"{name}_to_A"] = float((wins == 0).float().mean())
    return found


def spread(view) -> dict:
    """Mean mutual information and mean |MC - plain confidence| per teacher: how far its K
    passes move from its plain one."""
    return {teacher: {"mutual_information": float(view.mutual_information[:, i].mean()),
                      "mc_minus_plain": float((view.mc_confidence[:, i]
                                               - view.det_confidence[:, i]).abs().mean())}
            for i, teacher in enumerate(view.teachers)}


def sweep(out: Path, data: dict, teachers: dict, off: dict, results: dict, save) -> None:
    """Score the pool's first texts and dev at each rate (and the native teachers at a second
    MC seed); the routing tables on dev."""
    log = out / "commands.log"
    work = out / "dropout"
    pool = work / "pool.jsonl"
    lines = open(data["train"], encoding="utf-8").readlines()[:POOL_TEXTS]
    pool.write_text("".join(lines), encoding="utf-8")
    projects = {f"injected {rate:g}": write_project(work / f"rate-{rate:g}", off, pool, data,
                                                     dropout=rate) for rate in RATES}
    projects[f"native, MC seed {SECOND_SEED}"] = write_project(
        work / f"native-seed-{SECOND_SEED}", teachers, pool, data, seed=SECOND_SEED)
    stages = results.setdefault("stages", {})
    for name, project in projects.items():
        stage = debian8.kiwb("score", project, "--foreground", log=log)
        stages.setdefault(name, {k: v for k, v in stage.items() if k != "stdout"})
        save()
    native = out / "project"
    views = {f"native {NATIVE_RATE:g}": (scores(native, "unlabeled", POOL_TEXTS), scores(native, "eval"))}
    views.update({name: (scores(project, "unlabeled"), scores(project, "eval"))
                  for name, project in projects.items()})
    table = {}
    for name, (pool_view, dev_view) in views.items():
        for routing in ROUTINGS:
            table[f"{name} · {routing}"] = routed(pool_view, {"dev": dev_view}, routing, True)
        table[f"{name} · {routing}"]["spread_dev"] = spread(dev_view)
    native_pool, native_dev = views[f"native {NATIVE_RATE:g}"]
    # no dropout acting: the K passes equal the plain one (tests/test_decoder_teachers.py), so
    # the MC figures are the plain ones
    for routing in ROUTINGS:
        table[f"none · {routing}"] = routed(native_pool, {"dev": native_dev}, routing, False)
    for rate in RATES:  # one teacher native, the other injected
        rate_pool, rate_dev = views[f"injected {rate:g}"]
        for index, teacher in enumerate(native_pool.teachers):
            for routing in ROUTINGS:
                table[f"mixed: {teacher} injected {rate:g}, other native · {routing}"] = routed(
                    mixed(native_pool, rate_pool, index), {"dev": mixed(native_dev, rate_dev, index)},
                    routing, True)
    results["dev"] = table
    save()


def test_rows(out: Path, chosen: float, results: dict) -> None:
    """Routing on test at the native rate, plain, and the chosen rate when it is the native one
    (another rate would need test scored at it)."""
    native_pool, test = scores(out / "project", "unlabeled"), scores(out / "test-view", "unlabeled")
    rows = {}
    for routing in ROUTINGS:
        rows[f"native {NATIVE_RATE:g} · {routing}"] = routed(native_pool, {"test": test}, routing, True)
        rows[f"none · {routing}"] = routed(native_pool, {"test": test}, routing, False)
    results["test"] = rows
    results["chosen_rate"] = chosen


def choose(table: dict) -> float:
    """The injected rate (the native 0.1 among them: injecting 0.1 into these teachers is their
    own dropout) whose rank routing, kiwb's default, is best on dev."""
    candidates = {NATIVE_RATE: table[f"native {NATIVE_RATE:g} · rank"]["dev"]}
    candidates.update({rate: table[f"injected {rate:g} · rank"]["dev"] for rate in RATES})
    return max(candidates, key=lambda rate: (candidates[rate], -abs(rate - NATIVE_RATE)))


def with_seed(project: Path, seed: int) -> None:
    """Set [training] seed in a project's kiwb.toml."""
    config = project / "kiwb.toml"
    # debian8's projects set no [scoring] seed: every seed line is training's
    lines = [line for line in config.read_text().splitlines() if not line.startswith("seed = ")]
    at = lines.index("[training]") + 1
    config.write_text("\n".join(lines[:at] + [f"seed = {seed}"] + lines[at:]) + "\n")


def same_as_native(out: Path, data: dict, teachers: dict, off: dict, results: dict) -> None:
    """Where `auto`'s rate is MiniLM's own, a dropout-free copy scored under `auto` is its
    native teacher: the mixed pair (A native, B's copy under auto) is the native pair. Shown on
    test's first texts: the mixed pair under auto against the native pair, array by array."""
    import numpy as np

    log = out / "commands.log"
    sample = out / "dropout" / "test-sample.jsonl"
    sample.write_text("".join(open(data["test"], encoding="utf-8").readlines()[:SAMPLE_TEXTS]),
                      encoding="utf-8")
    found = {}
    for name, pair in (("native", teachers), ("auto", {"A": teachers["A"], "B": off["B"]})):
        project = out / "dropout" / f"sample-{name}"
        debian8.write_config(project, pair, sample, None, debian8.minilm_path(),
                             debian8.PRESETS["cpu"], label_unlabeled=True)
        debian8.kiwb("score", project, "--foreground", log=log)
        found[name] = scores(project, "unlabeled")
    results["auto_equals_native"] = {
        "texts": SAMPLE_TEXTS,
        "equal": {field: bool(np.array_equal(getattr(found["native"], field).numpy(),
                                             getattr(found["auto"], field).numpy()))
                  for field in ("mc_confidence", "det_confidence", "mutual_information")}}


SAMPLE_TEXTS = 64


def students(out: Path, data: dict, results: dict, save, seeds: int) -> None:
    """MUKI-Hard with rank routing on the whole pool, evaluated on test, at each seed: native
    dropout (routing.py's run at seed 0) and none (--no-mc: a dropout-free teacher's MC figures
    are its plain ones)."""
    log = out / "commands.log"
    native = out / "project"
    stages = results.setdefault("stages", {})
    found = results.setdefault("students", {})
    for seed in range(seeds):
        with_seed(native, seed)
        for label, run, extra in ((f"native {NATIVE_RATE:g}", f"muki-hard-rank-s{seed}", ()),
                                  ("none", f"muki-hard-rank-no-mc-s{seed}", ("--no-mc",))):
            state = debian8._run_state(native / "runs" / run)
            if state != "done":
                resume = ("--resume",) if state == "partial" else ()
                stages[f"train {run}"] = {k: v for k, v in debian8.kiwb(
                    "train", native, "--run", run, "--method", "muki-hard", "--routing", "rank",
                    *extra, *resume, "--foreground", log=log).items() if k != "stdout"}
            report = json.loads(debian8.kiwb("evaluate", native, "--run", run, "--data",
                                             data["test"], "--json", log=log)["stdout"])
            runs = found.setdefault(label, [])
            runs[:] = [r for r in runs if r["run"] != run] + [
                {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"], "run": run}]
            save()
    with_seed(native, 0)


def render(results: dict) -> str:
    percent = representations.percent
    lines = ["## Dropout for teachers without it (issue 45), debian-8 preset `cpu`", "",
             "debian-8's two MiniLM teachers as copies whose config.json sets every dropout rate "
             "to 0 (as ModernBERT, Qwen and Llama classifiers are published), scored with "
             "`[scoring] dropout = RATE` (the rate set in every dropout key of the config when the "
             "model is built). Injecting 0.1 into these copies is MiniLM's own dropout, so the "
             f"native rows are its scores. K = 16; routings fitted on the pool's first {POOL_TEXTS} "
             "texts; rates compared on dev (400 texts, one standard error about 2 points); "
             "`to A`: the share of texts routed to teacher A.", "",
             "### Routing on dev", "", "| teachers' dropout · routing | dev (%) | dev to A (%) |",
             "|---|---|---|"]
    for name, row in results.get("dev", {}).items():
        lines.append(f"| {name} | {percent(row['dev'])} | {percent(row['dev_to_A'])} |")
    spreads = {name.split(" · ")[0]: row["spread_dev"] for name, row in results.get("dev", {}).items()
               if "spread_dev" in row}
    if spreads:
        lines += ["", "How far the K passes move (dev means per teacher A / B): mutual information, "
                  "and |MC - plain confidence|:", "",
                  "| teachers' dropout | mutual information A / B | abs(MC - plain) A / B |", "|---|---|---|"]
        for name, by_teacher in spreads.items():
            mi = " / ".join(f"{v['mutual_information']:.4f}" for v in by_teacher.values())
            gap = " / ".join(f"{v['mc_minus_plain']:.4f}" for v in by_teacher.values())
            lines.append(f"| {name} | {mi} | {gap} |")
    if results.get("test"):
        lines += ["", f"### Routing on test (1,680 texts; rate chosen on dev: {results['chosen_rate']:g})",
                  "", "| teachers' dropout · routing | test (%) | test to A (%) |", "|---|---|---|"]
        for name, row in results["test"].items():
            lines.append(f"| {name} | {percent(row['test'])} | {percent(row['test_to_A'])} |")
    if results.get("auto_equals_native"):
        same = results["auto_equals_native"]
        lines += ["", f"The mixed pair kiwb's `auto` makes here (A native, B's dropout-free copy, "
                  f"given {results['chosen_rate']:g}) is the native pair: on test's first "
                  f"{same['texts']} texts, B's copy scored under `auto` and B native give "
                  + ("bitwise equal" if all(same["equal"].values()) else "different")
                  + " MC confidence, plain confidence and mutual information."]
    if results.get("students"):
        lines += ["", "### MUKI-Hard students, rank routing (test, 1,680 texts)", "",
                  "| teachers' dropout | accuracy (%) | macro-F1 (%) | seeds |", "|---|---|---|---|"]
        for name, runs in results["students"].items():
            cells = [" / ".join(percent(r[key]) for r in runs) for key in ("accuracy", "macro_f1")]
            lines.append(f"| {name} | {cells[0]} | {cells[1]} | {len(runs)} |")
    stages = results.get("stages", {})
    if stages:
        lines += ["", "Stages (wall seconds): " + "; ".join(
            f"{name} {stage['seconds']:.0f}" for name, stage in stages.items()) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", action="store_true",
                        help="also train the MUKI-Hard students (about 12 minutes each)")
    parser.add_argument("--seeds", type=int, default=2, help="student seeds")
    args = parser.parse_args()
    out = HERE / "out" / "cpu"
    preset = debian8.PRESETS["cpu"]
    data = debian8.split_data(out, preset)
    teachers = debian8.make_teachers(out, data, debian8.minilm_path(), preset, {})
    off = {name: dropout_off_copy(path, out / "dropout" / f"teacher_{name}_off")
           for name, path in teachers.items()}
    path = out / "dropout.json"
    results = json.loads(path.read_text()) if path.exists() else {}

    def save() -> None:
        path.write_text(json.dumps(results, indent=2))

    sweep(out, data, teachers, off, results, save)
    test_rows(out, choose(results["dev"]), results)
    save()
    print(render(results))
    if results["chosen_rate"] == NATIVE_RATE:
        same_as_native(out, data, teachers, off, results)
        save()
    if args.students:
        students(out, data, results, save, args.seeds)
    from report import write_section

    write_section("dropout cpu", "benchmarks/dropout_injection.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
