"""Choosing the routing per project (issue 58): `routing = "auto"` beside every fixed label-free
routing, on every real benchmark's dev and test sets.

    python benchmarks/auto_routing.py              # the tables, from the projects already scored
    python benchmarks/auto_routing.py --students all   # and the students with kiwb's defaults

Nothing here scores: it reads the projects that routing.py (debian-8) and many_teachers.py
(three to five teachers; two teachers that differ) scored, with the teachers' representations.
Every label-free routing is fitted on each project's pool as `kiwb integrate` fits it and
measured on dev and test (routing accuracy: the share of texts whose top-scored teacher knows
the gold label). Then:

- `auto` with the eval set: the choice kiwb makes on the dev texts' labels, measured on test;
  with fewer labels, the same choice on random subsets of dev (the mean over 200 draws);
- `auto` without labels: kiwb's label-free choice, measured on test;
- the joint router with a few labels (few-label routing beside `stacked`);
- the demo's eval set, as a smoke test (it chooses and is measured on the same texts).

Writes benchmarks/out/auto_routing.json and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8, report and the scripts that built the projects
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
import representation_routing as representations  # noqa: E402
from report import percent, write_section  # noqa: E402

from kiwb.errors import KiwbError  # noqa: E402

OUT = HERE / "out"
# name -> (project: its pool and dev, test view), as the other scripts left them
SETS = {
    "debian-8": (OUT / "cpu" / "project", OUT / "cpu" / "test-view"),
    **{f"{count} teachers": (OUT / "many_teachers" / f"{count}-teachers" / "project",
                             OUT / "many_teachers" / f"{count}-teachers" / "test-view")
       for count in (3, 4, 5)},
    "differ, small BERT on A": (OUT / "many_teachers" / "differ" / "small-A_MiniLM-B" / "project",
                                OUT / "many_teachers" / "differ" / "small-A_MiniLM-B" / "test-view"),
    "differ, small BERT on B": (OUT / "many_teachers" / "differ" / "MiniLM-A_small-B" / "project",
                                OUT / "many_teachers" / "differ" / "MiniLM-A_small-B" / "test-view"),
}
LABEL_COUNTS = (25, 50, 100, 200)   # labeled dev texts `auto` chooses on, drawn at random
DRAWS = 200
FEW_LABELS = (16, 64, 256)          # labeled texts the few-label routers are fitted on
FEW_LABEL_ROUTINGS = ("joint", "stacked")


def scored(project: Path) -> bool:
    """Whether a project's store exists (read-only: never creates one)."""
    return (project / "store.sqlite").exists()


def splits_of(name: str) -> dict:
    project, test_view = SETS[name]
    return {"pool": representations.scores_of(project, "unlabeled"),
            "dev": representations.scores_of(project, "eval"),
            "test": representations.scores_of(test_view, "unlabeled")}


def right_on(scores, routing_scores):
    from kiwb.core.routing_choice import routed_right

    return routed_right(routing_scores, scores.true_label_ids(), scores.coverage)


def fixed_routings(splits: dict) -> dict:
    """Every label-free candidate fitted on the pool: its per-text rightness on dev and test."""
    from kiwb.core import routing as routes
    from kiwb.core.routing_choice import candidates

    pool = splits["pool"]
    found = {}
    for option in candidates():
        fitted = routes.fit_routing(option.routing, pool.features(), use_mc=option.use_mc,
                                    teacher_names=pool.teachers)
        found[option.name] = {split: right_on(splits[split], splits[split].routing_scores(fitted))
                              for split in ("dev", "test")}
    return found


def auto_rows(fixed: dict) -> dict:
    """`auto`: the choice on every dev label (and its cross-validated figure), on fewer labels
    (mean test figure over random draws), and without labels."""
    import torch

    from kiwb.core.routing_choice import Candidate, choose_on_labels, label_free_choice

    names = list(fixed)
    label_free, _ = label_free_choice([Candidate.parse(name) for name in names])
    order = [label_free.name] + [name for name in names if name != label_free.name]
    dev = torch.stack([fixed[name]["dev"] for name in order], dim=1)
    test = torch.stack([fixed[name]["test"] for name in order], dim=1).double()
    outcome = choose_on_labels(dev)
    rows = {"labels": {"chosen": order[outcome.chosen], "dev": outcome.accuracies[outcome.chosen],
                       "cross_validated": outcome.cross_validated,
                       "test": float(test[:, outcome.chosen].mean()), "texts": outcome.texts},
            "label_free": {"chosen": label_free.name,
                           "test": float(fixed[label_free.name]["test"].double().mean()),
                           "dev": float(fixed[label_free.name]["dev"].double().mean())}}
    generator = torch.Generator().manual_seed(0)
    rows["fewer"] = {}
    for count in LABEL_COUNTS:
        if count >= len(dev):
            continue
        picked = []
        for _ in range(DRAWS):
            sample = torch.randperm(len(dev), generator=generator)[:count]
            picked.append(float(test[:, choose_on_labels(dev[sample], repeats=1).chosen].mean()))
        rows["fewer"][str(count)] = sum(picked) / len(picked)
    return rows


def few_label_rows(splits: dict) -> dict:
    """The few-label routings fitted on the first 16, 64, 256 dev texts of a seeded shuffle
    (dev's labels: the test texts measure), on test."""
    import torch

    from kiwb.core import routing as routes

    pool, dev, test = splits["pool"], splits["dev"], splits["test"]
    order = torch.randperm(len(dev.true_labels), generator=torch.Generator().manual_seed(0))
    found = {}
    for count in FEW_LABELS:
        if count > len(order):
            continue
        labeled = dev.rows(order[:count])
        for name in FEW_LABEL_ROUTINGS:
            try:
                fitted = routes.fit_routing(name, pool.features(), teacher_names=pool.teachers,
                                            labeled=labeled.labeled_features())
            except ValueError:  # too few labeled texts to fit on
                continue
            found.setdefault(name, {})[str(count)] = float(
                right_on(test, test.routing_scores(fitted)).double().mean())
    return found


def measure(name: str) -> dict:
    splits = splits_of(name)
    fixed = fixed_routings(splits)
    return {"teachers": splits["pool"].teachers, "texts": {split: len(scores.true_labels)
                                                           for split, scores in splits.items()},
            "fixed": {routing: {split: float(found[split].double().mean()) for split in found}
                      for routing, found in fixed.items()},
            "auto": auto_rows(fixed), "few_label": few_label_rows(splits)}


def render(results: dict) -> str:
    sets = {name: entry for name, entry in results["sets"].items()}
    lines = ["Routing accuracy (%), dev / test: the share of texts whose top-scored teacher "
             "knows the gold label. Fixed routings are fitted on each project's pool without "
             "labels; `auto` with labels chooses on dev's labels and is measured on test.", "",
             "| routing | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    routings = list(next(iter(sets.values()))["fixed"])
    best_test = {name: max(entry["fixed"].values(), key=lambda row: row["test"])["test"]
                 for name, entry in sets.items()}
    for routing in routings:
        cells = []
        for name, entry in sets.items():
            row = entry["fixed"][routing]
            mark = "**" if row["test"] == best_test[name] else ""
            cells.append(f"{percent(row['dev'])} / {mark}{percent(row['test'])}{mark}")
        lines.append(f"| {routing} | " + " | ".join(cells) + " |")
    cells = [f"{entry['auto']['labels']['chosen']}: {percent(entry['auto']['labels']['test'])}"
             for entry in sets.values()]
    lines.append("| **auto, eval labels** (chosen on dev, test) | " + " | ".join(cells) + " |")
    cells = [f"{percent(entry['auto']['labels']['cross_validated'])} / "
             f"{percent(entry['auto']['labels']['test'])}" for entry in sets.values()]
    lines.append("| auto, eval labels: cross-validated on dev / test | " + " | ".join(cells) + " |")
    for count in LABEL_COUNTS:
        cells = [percent(entry["auto"]["fewer"].get(str(count))) for entry in sets.values()]
        lines.append(f"| auto, {count} dev labels (mean of {DRAWS} draws), test | "
                     + " | ".join(cells) + " |")
    cells = [f"{entry['auto']['label_free']['chosen']}: "
             f"{percent(entry['auto']['label_free']['test'])}" for entry in sets.values()]
    lines.append("| **auto, no labels** (test) | " + " | ".join(cells) + " |")
    lines += ["", "Few-label routings fitted on dev texts with their labels (the first N of a "
              "seeded shuffle), test (%):", "",
              "| routing · labels | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    for routing in FEW_LABEL_ROUTINGS:
        for count in FEW_LABELS:
            cells = [percent(entry["few_label"].get(routing, {}).get(str(count)))
                     for entry in sets.values()]
            lines.append(f"| {routing} · {count} | " + " | ".join(cells) + " |")
    if any("student" in entry for entry in sets.values()):
        cells = [(f"{entry['student']['routing']}: {percent(entry['student']['accuracy'])} / "
                  f"{percent(entry['student']['macro_f1'])}") if "student" in entry else ""
                 for entry in sets.values()]
        lines += ["", "MUKI-Hard with kiwb's defaults (`kiwb train` with nothing set: routing "
                  "auto, which chose on the project's eval set, its dev split), test accuracy / "
                  "macro-F1 (%), one seed:", "", "| | " + " | ".join(sets) + " |",
                  "|---|" + "---|" * len(sets), "| MUKI-Hard, defaults | " + " | ".join(cells) + " |"]
    if results.get("demo"):
        demo = results["demo"]
        lines += ["", f"The demo (smoke test; its {demo['texts']} eval texts choose and measure): "
                  f"auto chose {demo['chosen']} ({percent(demo['accuracy'])}%); "
                  + ", ".join(f"{name} {percent(value)}" for name, value in demo["table"].items())
                  + "."]
    return "\n".join(lines) + "\n"


# The test file of each set's project (the protocol's test split as the scripts wrote it)
TEST_FILES = {"debian-8": OUT / "cpu" / "test.jsonl",
              **{f"{count} teachers": OUT / "many_teachers" / "test.jsonl" for count in (3, 4, 5)},
              "differ, small BERT on A": OUT / "many_teachers" / "debian8" / "test.jsonl",
              "differ, small BERT on B": OUT / "many_teachers" / "debian8" / "test.jsonl"}
STUDENT_RUN = "muki-hard-defaults"  # kiwb train with nothing set: MUKI-Hard, routing auto


def student(name: str, results: dict, save) -> None:
    """MUKI-Hard with kiwb's defaults (its eval set is the project's dev split, so auto
    chooses on dev's labels), trained in the set's project and evaluated on test; a run cut
    short by a killed benchmark resumes."""
    project = SETS[name][0]
    log = OUT / "auto_routing.log"
    run = project / "runs" / STUDENT_RUN
    state = debian8._run_state(run)
    found = results["sets"][name].setdefault("student", {})
    if state != "done":
        found["train"] = {k: v for k, v in debian8.kiwb(
            "train", project, "--run", STUDENT_RUN, *(("--resume",) if state == "partial" else ()),
            "--foreground", log=log).items() if k != "stdout"}
    report = json.loads(debian8.kiwb("evaluate", project, "--run", STUDENT_RUN, "--data",
                                     TEST_FILES[name], "--json", log=log)["stdout"])
    manifest = json.loads((run / "manifest.json").read_text())
    found.update(accuracy=report["accuracy"], macro_f1=report["macro_f1"],
                 routing=manifest["routing_choice"]["chosen"])
    save()


def demo_row(project: Path) -> dict | None:
    """The demo's integration as `kiwb integrate` records it: what auto chose on its eval set."""
    from kiwb.project.records import IntegrationRecord
    from kiwb.project.store import Store

    if not scored(project):
        return None
    with Store(project / "store.sqlite") as store:
        keys = [row[0] for row in store.connection.execute(
            "SELECT key FROM integrations ORDER BY created_at")]
        records = [IntegrationRecord.from_dict(store.integration(key)) for key in keys]
    chosen = [record.summary for record in records if record.summary.routing_choice is not None]
    if not chosen:
        return None
    choice = chosen[-1].routing_choice
    return {"chosen": choice.chosen, "accuracy": choice.table[choice.chosen],
            "texts": choice.labeled_texts, "table": choice.table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", type=Path, help="a demo folder integrated with auto (kiwb demo)")
    parser.add_argument("--students", default="",
                        help="the sets to train MUKI-Hard with kiwb's defaults on, "
                        "separated by semicolons (their names hold commas; all: every set), "
                        "after the tables")
    args = parser.parse_args()
    wanted = [name.strip() for name in args.students.split(";") if name.strip()]
    unknown = [name for name in wanted if name != "all" and name not in SETS]
    if unknown:  # said before the tables, which take minutes
        sys.exit(f"--students: no set named {', '.join(map(repr, unknown))}; the sets: "
                 + "; ".join(SETS))
    results_path = OUT / "auto_routing.json"
    previous = json.loads(results_path.read_text()) if results_path.exists() else {"sets": {}}
    results = {"machine": debian8.machine(), "sets": {}}
    for name, (project, test_view) in SETS.items():
        if scored(project) and scored(test_view):
            print(f"{name} ...", flush=True)
            try:
                results["sets"][name] = measure(name)
            except KiwbError as error:  # scored in part (many_teachers.py stopped midway)
                print(f"{name}: skipped, {error}", flush=True)
                continue
            if "student" in previous["sets"].get(name, {}):  # measured by an earlier run
                results["sets"][name]["student"] = previous["sets"][name]["student"]
            results_path.write_text(json.dumps(results, indent=2))
    if args.demo:
        results["demo"] = demo_row(args.demo)
    results_path.write_text(json.dumps(results, indent=2))
    wanted = list(results["sets"]) if args.students == "all" else wanted
    for name in wanted:
        print(f"student on {name} ...", flush=True)
        student(name, results, lambda: results_path.write_text(json.dumps(results, indent=2)))
    rendered = render(results)
    write_section("auto routing", "benchmarks/auto_routing.py", rendered)
    print(rendered)


if __name__ == "__main__":
    main()
