"""Three to five teachers on real text (issue 31): MUKI's Table 3 pattern on Debian sections.

    python benchmarks/many_teachers.py                # both parts, ~4 h on 2 CPU cores
    python benchmarks/many_teachers.py --part many    # three to five teachers (~2.5 h)
    python benchmarks/many_teachers.py --part differ  # teachers of two architectures (~1.5 h)
    python benchmarks/many_teachers.py --size tiny    # a smoke run of every step

Each part resumes after a kill where it was.

Data: the ten most frequent sections of ../shared/data/debian-packages.jsonl.gz that are not
debian-8's (devel, doc, golang, haskell, libdevel, libs, perl, python, rust, utils), split by
sha1(source) % 10 as the protocol says (0-6 train, 7 dev, 8-9 test), each split subsampled
evenly to the sizes below. Over the sorted labels, the paper's splits: 3 teachers {3,3,4},
4 teachers {2,2,2,4}, 5 teachers {2,2,2,2,2}. Every teacher is all-MiniLM-L6-v2 fine-tuned by
`kiwb teach` on its own labels' train rows (at most TEACHER_ROWS per label). Eight distinct
teachers cover the three splits (the 4-label teacher is the same for 3 and 4 teachers, the
three 2-label ones for 4 and 5), so each is scored once, in one project holding all of them,
whose store every N's project starts from (score sets are keyed by teacher and data, not by
project).

For each N: the integration of the test split (the Ensemble, each teacher, the routing
accuracy of the default routing), every label-free routing's accuracy on dev and test, and the
students (Vanilla KD, UHC, MUKI-Hard with the default routing and with MC confidence routing,
MUKI-Soft, Supervised on the pool's gold labels), evaluated on test. Scoring cost: texts x
teachers, and the seconds the score jobs took per teacher.

`--part differ` (~1.5 h): teachers of different architectures and tokenizers on debian-8's
halves (debian8.py's labels and halves, the protocol's split, sized as above). A small BERT
(4 layers, 128 wide, an 8,000-piece WordPiece vocabulary of its own) pre-trained here by
masked-language modelling on every train-split text of the Debian file (43,328 texts, no dev
or test text), as the demo builds its base, is taught each half; it is paired with a MiniLM
teacher of the other half, both ways round (small on A with MiniLM on B, and the reverse),
with the same rows as above (the Supervised student does not depend on the teachers: trained
once).

Writes benchmarks/out/many_teachers[-SIZE]/results.json and its sections of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # debian8, routing and report live beside this script
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
import representation_routing as representations  # noqa: E402
import routing  # noqa: E402
from report import percent, write_section  # noqa: E402

LABELS = sorted(["libs", "libdevel", "python", "doc", "perl", "utils", "devel", "haskell",
                 "rust", "golang"])
GROUPS = {3: (3, 3, 4), 4: (2, 2, 2, 4), 5: (2, 2, 2, 2, 2)}
SIZES = {
    # Scoring costs ~0.3 s a text per MiniLM teacher at K = 16 on 2 cores: 8 teachers on
    # 1,500 texts is about 1 h; 18 students of 3 epochs over 800 texts about 1 h.
    "cpu": {"teacher_rows": 300, "train": 800, "dev": 200, "test": 500, "teacher_epochs": 3.0,
            "student_epochs": 3.0, "student_batch": 16, "teacher_lr": 5e-5, "student_lr": 1e-4,
            "eval_every": 50, "pretrain_texts": None},
    "tiny": {"teacher_rows": 80, "train": 120, "dev": 60, "test": 80, "teacher_epochs": 3.0,
             "student_epochs": 1.0, "student_batch": 16, "teacher_lr": 1e-4, "student_lr": 2e-4,
             "eval_every": 4, "pretrain_texts": 3000},
}
# (row, train arguments): MUKI-Hard with the default routing and with MC confidence routing
RUNS = [
    ("vanilla-kd", ["--method", "vanilla-kd"]),
    ("uhc", ["--method", "uhc"]),
    ("muki-hard", ["--method", "muki-hard"]),
    ("muki-hard-confidence", ["--method", "muki-hard", "--routing", "confidence"]),
    ("muki-soft", ["--method", "muki-soft"]),
    ("supervised", ["--method", "supervised"]),
    # routing from the teachers' representations (issue 42), beside the default's two rows
    ("muki-hard-mahalanobis", ["--method", "muki-hard", "--routing", "mahalanobis"]),
    ("muki-soft-mahalanobis", ["--method", "muki-soft", "--routing", "mahalanobis"]),
]
ROUTINGS = [entry for entry in routing.LABEL_FREE if entry[2] in (None, "margin")]


def teacher_groups(count: int) -> list[list[str]]:
    """The sorted labels cut into the paper's group sizes for `count` teachers."""
    groups, start = [], 0
    for size in GROUPS[count]:
        groups.append(LABELS[start:start + size])
        start += size
    return groups


def teacher_name(labels: list[str]) -> str:
    return "-".join(labels)  # a valid teacher name (letters, digits, _ . -)


def split_data(out: Path, size: dict) -> dict[str, Path]:
    """The ten sections' rows split by the protocol's rule, sized (sized_splits)."""
    return debian8.write_splits(out, sized_splits(debian8.protocol_splits(LABELS), LABELS, size))


def sized_splits(splits: dict[str, list[dict]], labels: list[str], size: dict) -> dict:
    """The pool, dev and test spread evenly over their split; the teachers' rows at most
    `teacher_rows` per label of the train split."""
    chosen = {name: debian8.spread(rows, size[name]) for name, rows in splits.items()}
    chosen["teacher_train"] = [row for label in labels for row in debian8.spread(
        [row for row in splits["train"] if row["label"] == label], size["teacher_rows"])]
    return chosen


def make_teachers(out: Path, data: dict, base: str, size: dict, stages: dict) -> dict[str, Path]:
    """Every distinct teacher of the three splits, fine-tuned unless a previous run did."""
    wanted = {teacher_name(group): group for count in GROUPS for group in teacher_groups(count)}
    teachers = {}
    for name, labels in wanted.items():
        folder = out / "teachers" / name
        if not (folder / "config.json").exists():
            stages[f"teach_{name}"] = debian8.kiwb(
                "teach", "--base", base, "--data", data["teacher_train"], "--dev", data["dev"],
                "--labels", ",".join(labels), "--out", folder, "--epochs", size["teacher_epochs"],
                "--learning-rate", size["teacher_lr"], "--min-steps", "0", "--force",
                log=out / "commands.log")
        teachers[name] = folder
    return teachers


def write_config(project: Path, teachers: dict, unlabeled: Path, evaluation: Path | None,
                 base: str, size: dict) -> None:
    debian8.write_config(project, teachers, unlabeled, evaluation, base,
                         {"student_epochs": size["student_epochs"], "student_lr": size["student_lr"],
                          "student_batch": size["student_batch"], "eval_every": size["eval_every"]},
                         label_unlabeled=True)


def score_all(out: Path, data: dict, teachers: dict, base: str, size: dict) -> tuple[Path, Path]:
    """Every teacher on the pool and dev (one project) and on test (another), once."""
    log = out / "commands.log"
    scored, test_scored = out / "scores", out / "test-scores"
    write_config(scored, teachers, data["train"], data["dev"], base, size)
    write_config(test_scored, teachers, data["test"], None, base, size)
    for folder in (scored, test_scored):
        debian8.kiwb("score", folder, "--representations", "--foreground", log=log)
    return scored, test_scored


def seen_references(out: Path, data: dict, teachers: dict, base: str, size: dict) -> dict:
    """Each teacher's own training texts (its labels' teacher-train rows) as a representation
    routing's reference, by teacher: drawn in the scoring project, then left out of its config
    (the projects of each N copy its store and fit label-free)."""
    rows = [json.loads(line) for line in open(data["teacher_train"], encoding="utf-8")]
    files = {}
    for name in teachers:
        labels = name.split("-")
        files[name] = out / "seen" / f"{name}.jsonl"
        files[name].parent.mkdir(exist_ok=True)
        files[name].write_text("".join(json.dumps(row) + "\n" for row in rows
                                       if row["label"] in labels), encoding="utf-8")
    scored = out / "scores"
    debian8.write_config(scored, teachers, data["train"], data["dev"], base,
                         {"student_epochs": size["student_epochs"], "student_lr": size["student_lr"],
                          "student_batch": size["student_batch"], "eval_every": size["eval_every"]},
                         label_unlabeled=True, seen=files)
    debian8.kiwb("score", scored, "--representations", "--foreground", log=out / "commands.log")
    found = representations.seen_of(scored)
    write_config(scored, teachers, data["train"], data["dev"], base, size)
    return dict(zip(teachers, found, strict=True))


def representation_rows(project: Path, test_view: Path, seen: dict | None) -> dict:
    """The representation routings at kiwb's settings (with the teachers' seen texts too) and
    the grid of settings, fitted on the pool, measured on dev and test."""
    pool = routing.scores_of(project, "unlabeled")
    splits = {"dev": routing.scores_of(project, "eval"),
              "test": routing.scores_of(test_view, "unlabeled")}
    references = [seen[name] for name in pool.teachers] if seen else None
    return {"defaults": representations.default_rows(pool, splits, references),
            "grid": representations.sweep(pool, splits),
            "combinations": representations.combinations(pool, splits)}


def project_for(out: Path, count: int, scored: Path, teachers: dict, unlabeled: Path,
                evaluation: Path | None, base: str, size: dict, name: str) -> Path:
    """A project of `count` teachers whose store starts as a copy of `scored`'s (its score
    sets), its own runs kept across resumes."""
    project = out / f"{count}-teachers" / name
    if not (project / "store.sqlite").exists():
        project.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(scored / "store.sqlite") as source, \
                sqlite3.connect(project / "store.sqlite") as copy:
            source.backup(copy)  # a consistent copy, whatever the source's journal holds
        shutil.copytree(scored / "scores", project / "scores", dirs_exist_ok=True)
    mine = {teacher_name(group): teachers[teacher_name(group)] for group in teacher_groups(count)}
    write_config(project, mine, unlabeled, evaluation, base, size)
    return project


def scoring_seconds(scored: Path) -> dict[str, dict]:
    """Per teacher: the texts its score jobs drew and the seconds they took."""
    with sqlite3.connect(scored / "store.sqlite") as db:
        rows = db.execute("SELECT sets.teacher, SUM(shards.rows), SUM(shards.seconds) "
                          "FROM score_shards AS shards JOIN score_sets AS sets "
                          "ON shards.score_key = sets.key WHERE shards.status = 'done' "
                          "GROUP BY sets.teacher").fetchall()
    return {teacher: {"texts": texts, "seconds": round(seconds, 1)}
            for teacher, texts, seconds in rows}


def integrate_count(out: Path, count: int, data: dict, teachers: dict,
                    scored: tuple[Path, Path], base: str, size: dict, entry: dict) -> Path:
    """`count` teachers' project and test view, their integration and routing table; returns
    the project (the students train there)."""
    log = out / "commands.log"
    entry["teachers"] = [teacher_name(group) for group in teacher_groups(count)]
    project = project_for(out, count, scored[0], teachers, data["train"], data["dev"], base,
                          size, "project")
    test_view = project_for(out, count, scored[1], teachers, data["test"], None, base, size,
                            "test-view")
    for folder in (project, test_view):  # nothing left to score: the copies hold it all
        debian8.kiwb("score", folder, "--foreground", log=log)
    entry["test_integration"] = json.loads(
        debian8.kiwb("integrate", test_view, "--json", log=log)["stdout"])
    entry["routings"] = routing_table(project, test_view)
    return project


def routing_table(project: Path, test_view: Path) -> dict:
    """Each label-free routing, fitted on the pool, measured on dev and test."""
    pool = routing.scores_of(project, "unlabeled")
    splits = {"dev": routing.scores_of(project, "eval"),
              "test": routing.scores_of(test_view, "unlabeled")}
    found = {routing.routing_name(*spec): routing.measure(*spec[:3], pool, None, splits)
             for spec in ROUTINGS}
    return {**found, **representations.auto_rows(pool, splits)}  # kiwb's default beside them


def students(project: Path, runs: list, test: Path, stages: dict, stage: str, found: dict,
             save, log: Path) -> None:
    """Train each run (a run cut short by a killed benchmark resumes where it was) and
    evaluate it on `test`, saving after each."""
    for run, extra in runs:
        state = debian8._run_state(project / "runs" / run)
        if state != "done":
            resume = ("--resume",) if state == "partial" else ()
            stages[f"{stage}_{run}"] = debian8.kiwb(
                "train", project, "--run", run, *extra, *resume, "--foreground", log=log)
        report = json.loads(debian8.kiwb("evaluate", project, "--run", run, "--data", test,
                                         "--json", log=log)["stdout"])
        found[run] = {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
                      "per_class": report["per_class_accuracy"]}
        save()


SMALL_BERT = {"vocab_size": 8000, "hidden_size": 128, "layers": 4, "heads": 4, "dropout": 0.1,
              "max_length": 128, "mlm_epochs": 2, "mlm_learning_rate": 1e-3,
              "mlm_batch_size": 64, "seed": 0}
PAIRINGS = {"small-A + MiniLM-B": ("small", "minilm"), "MiniLM-A + small-B": ("minilm", "small")}


def differ_data(out: Path, size: dict) -> dict[str, Path]:
    """debian-8's rows split by the protocol, sized as the many-teachers part, and the small
    BERT's pre-training texts: every train-split text of every Debian section (unlabeled; no
    dev or test text among them). The data file is read once."""
    every = debian8.protocol_splits(None)
    mine = {name: [row for row in rows if row["label"] in debian8.LABELS]
            for name, rows in every.items()}
    chosen = sized_splits(mine, debian8.LABELS, size)
    chosen["pretrain"] = debian8.spread(every["train"], size["pretrain_texts"])
    return debian8.write_splits(out, chosen)


def small_bert(out: Path, data: dict, stages: dict, device: str = "cpu") -> Path:
    """The small BERT base: its own WordPiece vocabulary and masked-language modelling on the
    pre-training texts (kiwb.demo.build.pretrain_base, with a larger recipe). `device`: where
    to pre-train it (a GPU machine can build it and this part resumes from its folder)."""
    import dataclasses
    import time

    import torch

    from kiwb.demo.build import pretrain_base
    from kiwb.demo.recipe import FULL

    folder = out / "small-bert"
    if not (folder / "config.json").exists():
        rows = [json.loads(line) for line in open(data["pretrain"], encoding="utf-8")]
        started = time.perf_counter()
        if device == "cpu":
            torch.set_num_threads(2)
        pretrain_base({"train": rows}, dataclasses.replace(FULL, **SMALL_BERT), folder,
                      torch.device(device))
        stages["pretrain_small_bert"] = {"seconds": round(time.perf_counter() - started, 1),
                                         "texts": len(rows), "device": device}
    return folder


def differ_seen(folder: Path, project: Path, teachers: dict, data: dict, base: str,
                size: dict) -> dict:
    """The pairing's teachers' own training texts (the teacher-train rows of their half), as
    representation routing references by teacher (drawn in the project, then left out of it)."""
    rows = [json.loads(line) for line in open(data["teacher_train"], encoding="utf-8")]
    files = {}
    for name in teachers:  # "small-A", "minilm-B": the half is the last letter
        labels = debian8.TEACHER_A if name.endswith("A") else debian8.TEACHER_B
        files[name] = folder / f"seen-{name}.jsonl"
        files[name].write_text("".join(json.dumps(row) + "\n" for row in rows
                                       if row["label"] in labels), encoding="utf-8")
    debian8.write_config(project, teachers, data["train"], data["dev"], base,
                         {"student_epochs": size["student_epochs"], "student_lr": size["student_lr"],
                          "student_batch": size["student_batch"], "eval_every": size["eval_every"]},
                         label_unlabeled=True, seen=files)
    debian8.kiwb("score", project, "--representations", "--foreground", log=folder / "seen.log")
    found = representations.seen_of(project)
    write_config(project, teachers, data["train"], data["dev"], base, size)
    return dict(zip(teachers, found, strict=True))


def differ(out: Path, size_name: str, results: dict, save, args_runs: str | None = None) -> None:
    """Small-BERT and MiniLM teachers on debian-8's halves, both ways round."""
    size = SIZES[size_name]
    log, stages = out / "commands.log", results.setdefault("stages", {})
    data = differ_data(out / "debian8", size)
    results["differ_rows"] = {name: sum(1 for _ in open(path)) for name, path in data.items()}
    base = debian8.minilm_path()
    small = small_bert(out, data, stages)
    save()
    teachers = {}
    for half, labels in (("A", debian8.TEACHER_A), ("B", debian8.TEACHER_B)):
        for kind, start, lr in (("minilm", base, size["teacher_lr"]), ("small", small, 1e-3)):
            folder = out / "debian8" / f"{kind}-{half}"
            if not (folder / "config.json").exists():
                stages[f"teach_{kind}_{half}"] = debian8.kiwb(
                    "teach", "--base", start, "--data", data["teacher_train"], "--dev", data["dev"],
                    "--labels", ",".join(labels), "--out", folder,
                    "--epochs", size["teacher_epochs"], "--learning-rate", lr,
                    "--min-steps", "0", "--force", log=log)
            teachers[(kind, half)] = folder
    entry = results.setdefault("differ", {})
    for name, (kind_a, kind_b) in PAIRINGS.items():
        mine = {f"{kind_a}-A": teachers[(kind_a, "A")], f"{kind_b}-B": teachers[(kind_b, "B")]}
        folder = out / "differ" / name.replace(" + ", "_")
        project, test_view = folder / "project", folder / "test-view"
        write_config(project, mine, data["train"], data["dev"], base, size)
        write_config(test_view, mine, data["test"], None, base, size)
        for view in (project, test_view):
            debian8.kiwb("score", view, "--representations", "--foreground", log=log)
        pairing = entry.setdefault(name, {"teachers": list(mine)})
        pairing["test_integration"] = json.loads(
            debian8.kiwb("integrate", test_view, "--json", log=log)["stdout"])
        pairing["routings"] = routing_table(project, test_view)
        pairing["scoring"] = scoring_seconds(project)
        pairing["representation"] = representation_rows(
            project, test_view, differ_seen(folder, project, mine, data, base, size))
        save()
        runs = RUNS if name == next(iter(PAIRINGS)) else [r for r in RUNS if r[0] != "supervised"]
        runs = chosen_runs(runs, args_runs)
        students(project, runs, data["test"], stages, f"train_{name}",
                 pairing.setdefault("students", {}), save, log)


def chosen_runs(runs: list, asked: str | None) -> list:
    """The runs `--runs` names, in the order asked (the first ones are the ones that matter
    most when the session's time runs out); all of `runs` when it names none."""
    if not asked:
        return runs
    named = dict(runs)
    return [(name, named[name]) for name in asked.split(",") if name in named]


def render_differ(results: dict) -> str:
    pairings = results.get("differ", {})
    lines = ["| row (debian-8 test) | " + " | ".join(pairings) + " |",
             "|---|" + "---|" * len(pairings)]

    def row(name: str, values: list[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(values) + " |")

    evals = [entry.get("test_integration", {}) for entry in pairings.values()]
    for index in range(2):
        row(f"teacher {'AB'[index]} alone",
            [f"{entry['teachers'][index]}: {percent(item.get('teacher_accuracy', {}).get(entry['teachers'][index]))}"
             for entry, item in zip(pairings.values(), evals, strict=True)])
    row("Ensemble accuracy", [percent(item.get("ensemble_accuracy")) for item in evals])
    row("routing accuracy (default routing)",
        [percent((item.get("routing_accuracy") or {}).get("chosen")) for item in evals])
    carried = False
    for run, _ in RUNS:
        if not any(run in entry.get("students", {}) for entry in pairings.values()):
            continue  # not trained in this results file (a partial rerun, --runs)
        cells = []
        for entry in pairings.values():
            student = entry.get("students", {}).get(run)
            mark = " †" if student and student.get("carried_from") else ""
            carried = carried or bool(mark)
            cells.append(f"{percent(student['accuracy'])} / {percent(student['macro_f1'])}{mark}"
                         if student else "")
        row(f"student {run} (accuracy / macro-F1)", cells)
    for spec in ROUTINGS:
        name = routing.routing_name(*spec)
        row(f"routing {name}, dev / test", [
            (f"{percent(found['dev'])} / {percent(found['test'])}"
             if (found := entry.get("routings", {}).get(name)) else "")
            for entry in pairings.values()])
    for label, cells in auto_cells(pairings.values()).items():
        row(f"routing {label}, dev / test", cells)
    if carried:
        lines += ["", "† from an earlier run of this part on the same teachers, not trained "
                  "again: that run's teachers, Ensemble, routings and MUKI-Hard figures are "
                  "reproduced here to the decimal (`carried_from` in results.json)."]
    table = representations.render_columns(
        {name: entry.get("representation") for name, entry in pairings.items()})
    if table:
        lines += ["", "From the teachers' representations (issue 42): kiwb's settings, with "
                  "each teacher's own training texts (seen), and the best settings of the grid "
                  "on dev:", "", *table]
    return "\n".join(lines)


def auto_cells(entries) -> dict[str, list[str]]:
    """kiwb's `routing = "auto"` rows (with the eval labels, and without), each cell naming
    the routing chosen there."""
    found = {}
    for label in ("eval labels", "no labels"):
        cells = []
        for entry in entries:
            name = next((name for name in entry.get("routings", {})
                         if name.startswith(f"auto ({label}: ")), None)
            row = entry["routings"][name] if name else None
            cells.append(f"{name.split(': ', 1)[1].removesuffix(')')}: {percent(row['dev'])} / "
                         f"{percent(row['test'])}" if row else "")
        if any(cells):
            found[f"auto ({label})"] = cells
    return found


def render(results: dict) -> str:
    counts = results.get("counts", {})
    lines = [f"Size `{results['size']}`: pool {results['rows']['train']:,}, dev "
             f"{results['rows']['dev']:,}, test {results['rows']['test']:,} texts; "
             f"{results['size_settings']['teacher_rows']} train rows per label for the teachers.",
             "", "| row (test) | " + " | ".join(f"{n} teachers" for n in counts) + " |",
             "|---|" + "---|" * len(counts)]

    def row(name: str, values: list[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(values) + " |")

    # the test view's texts carry their labels: its figures are the integration's own
    integrations = [entry.get("test_integration", {}) for entry in counts.values()]
    row("Ensemble accuracy", [percent(item.get("ensemble_accuracy")) for item in integrations])
    row("routing accuracy (default routing)",
        [percent((item.get("routing_accuracy") or {}).get("chosen")) for item in integrations])
    row("routing check (default routing)",
        [(item.get("check") or {}).get("status", "") for item in integrations])
    for run, _ in RUNS:
        if not any(run in entry.get("students", {}) for entry in counts.values()):
            continue  # not trained in this results file (a partial rerun, --runs)
        row(f"student {run} (accuracy / macro-F1)", [
            (f"{percent(student['accuracy'])} / {percent(student['macro_f1'])}"
             if (student := entry.get("students", {}).get(run)) else "") for entry in counts.values()])
    if any("label_shares" in entry for entry in counts.values()):
        lines += ["", "Who wins the test texts: each teacher's labels' share of them, and the "
                  "share each routing sends it (fitted on the pool):", "",
                  "| teachers | teacher | its labels | confidence | rank |", "|---|---|---|---|---|"]
        for count, entry in counts.items():
            routings = entry.get("routings", {})
            for teacher in entry["teachers"]:
                won = [routings.get(name, {}).get("test_wins", {}) for name in ("confidence", "rank")]
                total = [max(1, sum(wins.values())) for wins in won]
                lines.append(f"| {count} | {teacher} | "
                             f"{percent(entry.get('label_shares', {}).get(teacher))} | "
                             + " | ".join(percent(wins.get(teacher, 0) / n) if wins else ""
                                          for wins, n in zip(won, total, strict=True)) + " |")
    lines += ["", "Routing accuracy of each label-free routing, dev / test:", "",
              "| routing | " + " | ".join(f"{n} teachers" for n in counts) + " |",
              "|---|" + "---|" * len(counts)]
    for spec in ROUTINGS:
        name = routing.routing_name(*spec)
        row(name, [(f"{percent(found['dev'])} / {percent(found['test'])}"
                    if (found := entry.get("routings", {}).get(name)) else "")
                   for entry in counts.values()])
    for label, cells in auto_cells(counts.values()).items():
        row(label, cells)
    table = representations.render_columns(
        {f"{count} teachers": entry.get("representation") for count, entry in counts.items()})
    if table:
        lines += ["", "From the teachers' representations (issue 42): kiwb's settings, with "
                  "each teacher's own training texts (seen), and the best settings of the grid "
                  "on dev:", "", *table]
    cost = results.get("scoring", {})
    lines += ["", "Scoring cost (K = 16): texts x teachers per N, and the score jobs' seconds:", "",
              "| | " + " | ".join(f"{n} teachers" for n in counts) + " |",
              "|---|" + "---|" * len(counts)]
    row("texts x teachers", [f"{sum(cost.get(t, {}).get('texts', 0) for t in entry['teachers']):,}"
                             for entry in counts.values()])
    row("seconds", [f"{sum(cost.get(t, {}).get('seconds', 0) for t in entry['teachers']):,.0f}"
                    for entry in counts.values()])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="cpu")
    parser.add_argument("--counts", default="3,4,5", help="teacher counts to run (comma list)")
    parser.add_argument("--part", choices=("all", "many", "differ"), default="all")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the BENCHMARKS.md sections from results.json")
    parser.add_argument("--runs", help="the student runs to train, comma-separated (default: "
                        "all of " + ", ".join(run for run, _ in RUNS) + ")")
    parser.add_argument("--section", default="many teachers",
                        help="the BENCHMARKS.md section to write (another name keeps the "
                        "published one: a partial rerun, with --runs, beside it)")
    args = parser.parse_args()
    size = SIZES[args.size]
    out = HERE / "out" / ("many_teachers" + ("" if args.size == "cpu" else f"-{args.size}"))
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results.update(size=args.size, size_settings=size, labels=LABELS,
                   groups={str(n): teacher_groups(n) for n in GROUPS},
                   machine=debian8.machine())

    def save() -> None:
        results_path.write_text(json.dumps(results, indent=2))

    if args.render:
        publish(out, args.size, results, args.part, args.section)
        save()
        return
    if args.part in ("all", "many"):
        many(out, args, size, results, save)
    if args.part in ("all", "differ"):
        differ(out, args.size, results, save, args.runs)
    publish(out, args.size, results, args.part, args.section)
    save()


def publish(out: Path, size_name: str, results: dict, part: str,
            section: str = "many teachers") -> None:
    """Print each part's tables (and write them into BENCHMARKS.md for the cpu size)."""
    for name, wanted, render_part in ((section, "many", render),
                                      ("teachers that differ", "differ", render_differ)):
        key = "counts" if wanted == "many" else "differ"
        if part not in ("all", wanted) or key not in results:
            continue
        if wanted == "many":
            add_label_shares(out, results)
        if size_name == "cpu":
            write_section(name, "benchmarks/many_teachers.py", render_part(results))
        print(render_part(results))


def add_label_shares(out: Path, results: dict) -> None:
    """Per N and teacher, the share of the test texts whose label is one of the teacher's."""
    labels = [json.loads(line)["label"] for line in open(out / "test.jsonl", encoding="utf-8")]
    for count, entry in results["counts"].items():
        entry["label_shares"] = {
            teacher_name(group): sum(label in group for label in labels) / len(labels)
            for group in teacher_groups(int(count))}


def many(out: Path, args, size: dict, results: dict, save) -> None:
    """Three, four and five MiniLM teachers."""
    base = debian8.minilm_path()
    data = split_data(out, size)
    results["rows"] = {name: sum(1 for _ in open(path)) for name, path in data.items()}
    teachers = make_teachers(out, data, base, size, results.setdefault("stages", {}))
    save()
    scored = score_all(out, data, teachers, base, size)
    results["scoring"] = {**scoring_seconds(scored[0]), **{
        f"{teacher} (test)": figures for teacher, figures in scoring_seconds(scored[1]).items()}}
    for teacher, figures in scoring_seconds(scored[1]).items():  # pool, dev and test together
        mine = results["scoring"].setdefault(teacher, {"texts": 0, "seconds": 0.0})
        mine["texts"] += figures["texts"]
        mine["seconds"] = round(mine["seconds"] + figures["seconds"], 1)
    save()
    counts = [int(count) for count in args.counts.split(",")]
    seen = seen_references(out, data, teachers, base, size)
    projects = {}
    for count in counts:  # every N's integration first: cheap once scored, the students are not
        entry = results.setdefault("counts", {}).setdefault(str(count), {})
        projects[count] = integrate_count(out, count, data, teachers, scored, base, size, entry)
        entry["representation"] = representation_rows(
            projects[count], projects[count].parent / "test-view", seen)
        save()
    runs = chosen_runs(RUNS, args.runs)
    for count in counts:
        students(projects[count], runs, data["test"], results["stages"], f"train_{count}",
                 results["counts"][str(count)].setdefault("students", {}), save,
                 out / "commands.log")


if __name__ == "__main__":
    main()
