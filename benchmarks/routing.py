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
import representation_routing as representations  # noqa: E402

# joint-mixture, temperature, mixture, quantile-mixture and trust, measured here first, were
# removed from kiwb (never the best: BENCHMARKS.md keeps their rows). (routing, use_mc, feature
# set); the feature set was the removed mixtures' and trust's, so it is None for every row now.
LABEL_FREE = [("confidence", True, None), ("confidence", False, None), ("rank", True, None),
              ("rank", False, None), ("class-rank", True, None), ("class-rank", False, None)] + [
    # the representation routings (issue 42): no dropout, so no plain variant; and the joint
    # router over them (issue 58)
    ("energy", True, None), ("mahalanobis", True, None), ("knn", True, None),
    ("joint", True, None)]
FEW_LABEL = [("stacked", use_mc, None) for use_mc in (True, False)]
LABEL_COUNTS = (16, 64, 256)
STUDENT_LABELS = 64
LABEL_SEED = 0


def routing_name(routing: str, use_mc: bool, features: str | None) -> str:
    return routing + ("" if use_mc else " (plain)") + (f" [{features}]" if features else "")


def representation_rows(project: Path) -> int:
    """Texts x teachers whose representation the project's store holds."""
    import sqlite3

    if not (project / "store.sqlite").exists():
        return 0
    with sqlite3.connect(project / "store.sqlite") as db:
        return db.execute("SELECT COALESCE(SUM(d.rows), 0) FROM score_shards d JOIN score_sets s "
                          "ON d.score_key = s.key WHERE d.status = 'done' AND "
                          "s.meta_json LIKE '%\"holds\": \"representation\"%'").fetchone()[0]


def write_seen(out: Path, data: dict) -> dict[str, Path]:
    """Each teacher's own training texts (the teacher-train rows of its labels), with labels:
    what a user who fine-tuned the teachers has (kiwb.toml [[teachers]] seen)."""
    rows = [json.loads(line) for line in open(data["teacher_train"], encoding="utf-8")]
    found = {}
    for name, labels in (("A", debian8.TEACHER_A), ("B", debian8.TEACHER_B)):
        found[name] = out / f"seen_{name}.jsonl"
        found[name].write_text("".join(json.dumps(row) + "\n" for row in rows
                                       if row["label"] in labels), encoding="utf-8")
    return found


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
    """A scored view's scores of one data set, with the teachers' representations."""
    return representations.scores_of(project, role)


def first_rows(scores, count: int):
    """The first `count` texts of a score set (the smaller labeled sets are prefixes)."""
    return dataclasses.replace(
        scores, mc_confidence=scores.mc_confidence[:count],
        det_confidence=scores.det_confidence[:count],
        mutual_information=scores.mutual_information[:count],
        det_probs=[p[:count] for p in scores.det_probs],
        det_logits=[p[:count] for p in scores.det_logits],
        mc_probs=[p[:count] for p in scores.mc_probs], true_labels=scores.true_labels[:count],
        representations=[p[:count] for p in scores.representations] if scores.representations else None)


def measure(routing: str, use_mc: bool, features: str | None, pool, labeled, splits: dict) -> dict:
    """Routing accuracy of one fitted routing on each split, and who wins the test texts."""
    from kiwb.core import routing as routes
    from kiwb.kinds.sequence.integration import routing_accuracies

    fitted = routes.fit_routing(
        routing, pool.features(), use_mc=use_mc,
        labeled=labeled.labeled_features() if labeled is not None else None,
        teacher_names=pool.teachers)
    found = {name: routing_accuracies(scores, scores.true_label_ids(), fitted)["chosen"]
             for name, scores in splits.items()}
    routed = splits["test"].routing_scores(fitted).argmax(dim=1)
    found["test_wins"] = {teacher: int((routed == i).sum())
                          for i, teacher in enumerate(splits["test"].teachers)}
    found["share"] = {teacher: router.share for teacher, router in
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
    # kiwb's default beside them, as `kiwb integrate` chooses it (dev's labels, or none)
    for name, row in representations.auto_rows(pool, splits).items():
        tables["label_free"][name] = {**row, "test_wins": {}, "share": {},
                                      "routing": "auto", "use_mc": True, "features": None}
    for routing, use_mc, features in FEW_LABEL:
        for count in LABEL_COUNTS:
            tables["few_label"].setdefault(routing_name(routing, use_mc, features), {})[str(count)] = \
                measure(routing, use_mc, features, pool, first_rows(labeled_all, count), splits)
    return tables


def best_on_dev(entries: dict) -> str:
    return max(entries, key=lambda name: entries[name]["dev"])


def students(out: Path, project: Path, data: dict, teachers: dict, base: str, preset: dict,
             labeled: Path, tables: dict, seeds: int, methods: list[str], results: dict,
             results_path: Path, *, few_label: bool = True, seen: dict | None = None) -> None:
    """MUKI-Hard and -Soft with `rank` (kiwb's label-free routing before issue 42), with the
    best label-free routing on dev, with the best 64-label one (`few_label`), and MUKI-Hard
    with mahalanobis on the teachers' `seen` texts."""
    from kiwb.core.choices import AUTO_ROUTING, ROUTINGS

    log = out / "commands.log"
    # rows of earlier runs measured routings (and feature sets) kiwb no longer has
    usable = lambda entry: (entry["routing"] in (AUTO_ROUTING, *ROUTINGS)  # noqa: E731
                            and entry["features"] in (None, "margin"))
    free = best_on_dev({name: entry for name, entry in tables["label_free"].items() if usable(entry)})
    chosen = [("rank", tables["label_free"]["rank"], (), methods)]
    if free != "rank":
        chosen.append((free, tables["label_free"][free], (), methods))
    results["students_chosen"] = {"label_free": free}
    if few_label:
        few_label_rows = {name: by_count[str(STUDENT_LABELS)] for name, by_count
                          in tables["few_label"].items() if usable(by_count[str(STUDENT_LABELS)])}
        few = best_on_dev(few_label_rows)
        chosen.append((few, few_label_rows[few], ("labeled",), methods))
        results["students_chosen"][f"{STUDENT_LABELS}_labels"] = few
    if seen is not None:
        chosen.append(("mahalanobis · seen", {"routing": "mahalanobis", "use_mc": True},
                       ("seen",), methods[:1]))
    config = project / "kiwb.toml"

    def configure(uses: tuple, seed: int) -> None:
        debian8.write_config(project, teachers, data["train"], data["dev"], base, preset,
                             label_unlabeled=True, seen=seen if "seen" in uses else None)
        text = config.read_text()
        if few_label:
            text += (f'[data.labeled]\npath = "{labeled}"\nlabel_column = "label"\n'
                     f"limit = {STUDENT_LABELS}\n")
        lines = text.splitlines()
        # the seed belongs to [training]: put it right after that section's header
        at = lines.index("[training]") + 1
        config.write_text("\n".join(lines[:at] + [f"seed = {seed}"] + lines[at:]) + "\n")

    configure((), 0)
    debian8.kiwb("score", project, "--foreground", log=log)  # the 64 labeled texts only
    for seed in range(seeds):
        for name, entry, uses, its_methods in chosen:
            configure(uses, seed)
            if "seen" in uses:
                debian8.kiwb("score", project, "--foreground", log=log)  # the seen texts
            routing, use_mc = entry["routing"], entry["use_mc"]
            for method in its_methods:
                run = f"{method}-{routing}{'' if use_mc else '-no-mc'}"
                run += f"-{STUDENT_LABELS}labels" if "labeled" in uses else ""
                run += "-seen" if "seen" in uses else ""
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
                key = f"{method} · {name}" + (f" · {STUDENT_LABELS} labels" if "labeled" in uses else "")
                seeds_of = results.setdefault("students", {}).setdefault(key, [])
                seeds_of[:] = [entry for entry in seeds_of if entry["run"] != run] + [
                    {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
                     "per_class": report["per_class_accuracy"], "run": run}]
                results_path.write_text(json.dumps(results, indent=2))
    configure((), 0)


def representation_tables(out: Path, project: Path, test_view: Path, data: dict, teachers: dict,
                          base: str, preset: dict, seen: dict, results: dict, save) -> None:
    """Routing from the teachers' representations: kiwb's settings, the grid they were chosen
    from on dev, seen texts, the mean of the last hidden states, and combinations with the
    confidence routings; `mail`'s routed recall."""
    log = out / "commands.log"
    pool = scores_of(project, "unlabeled")
    splits = {"dev": scores_of(project, "eval"), "test": scores_of(test_view, "unlabeled")}
    found = results.setdefault("representation", {})
    found["grid"] = representations.sweep(pool, splits)
    found["chosen_on_dev"] = {routing: representations.best_on_dev(found["grid"], routing)
                              for routing in ("mahalanobis", "knn")}
    found["combinations"] = representations.combinations(pool, splits)
    save()

    rewrite = views_writer(project, test_view, data, teachers, base, preset)

    rewrite(seen=seen)  # the teachers' own training texts: one forward each
    found["seen_stage"] = {k: v for k, v in debian8.kiwb(
        "score", project, "--representations", "--foreground", log=log).items() if k != "stdout"}
    seen_references = representations.seen_of(project)
    found["defaults"] = representations.default_rows(pool, splits, seen_references)
    found["seen_grid"] = representations.sweep(pool, splits, seen_references)
    save()
    other_representations(project, test_view, rewrite, log, found)
    save()


def views_writer(project: Path, test_view: Path, data: dict, teachers: dict, base: str,
                 preset: dict):
    """Rewrites the project's and the test view's kiwb.toml with other scoring options."""
    def rewrite(**options) -> None:
        for folder, unlabeled, evaluation in ((project, data["train"], data["dev"]),
                                              (test_view, data["test"], None)):
            debian8.write_config(folder, teachers, unlabeled, evaluation, base, preset,
                                 label_unlabeled=True, **options)
    return rewrite


# The representations measured beside the head's input ([scoring] representation), in words
OTHER_REPRESENTATIONS = {"mean": "The mean of the last hidden states",
                         "cls": "The first token's last hidden state ([CLS] before the pooler)"}


def other_representations(project: Path, test_view: Path, rewrite, log: Path, found: dict) -> None:
    """Other representations than the head's input: the mean of the last hidden states, and
    the first token's last hidden state ([CLS] before BERT's pooler; issue 58), each drawn by
    one forward per text and read by the routings that read representations."""
    for mode in OTHER_REPRESENTATIONS:
        rewrite(representation=mode)
        for folder in (project, test_view):
            found[f"{mode}_stage_{folder.name}"] = {k: v for k, v in debian8.kiwb(
                "score", folder, "--representations", "--foreground", log=log).items()
                if k != "stdout"}
        mode_pool = scores_of(project, "unlabeled")
        mode_splits = {"dev": scores_of(project, "eval"), "test": scores_of(test_view, "unlabeled")}
        found[mode] = {name: representations.measured(
            representations.fitted_scores(name, mode_pool, mode_splits), mode_splits)
            for name in ("mahalanobis", "knn", "joint")}
    rewrite()


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
    lines += render_representation(results.get("representation") or {})
    if results.get("students"):
        lines += ["", "### Students (8-way test accuracy)", "",
                  "| student · routing | test accuracy (%) | macro-F1 (%) | seeds |", "|---|---|---|---|"]
        for key, runs in results["students"].items():
            accuracy = sum(r["accuracy"] for r in runs) / len(runs)
            f1 = sum(r["macro_f1"] for r in runs) / len(runs)
            lines.append(f"| {key} | {100 * accuracy:.1f} | {100 * f1:.1f} | {len(runs)} |")
    return "\n".join(lines) + "\n"


def render_representation(found: dict) -> list[str]:
    """The representation routings' tables (empty until measured)."""
    if not found.get("defaults"):
        return []
    percent = representations.percent
    lines = ["", "### From the teachers' representations (issue 42)", "",
             "At kiwb's settings (chosen on five dev sets, this one among them: "
             "representation_settings.py); `mail` routed: the share of test `mail` texts "
             "routed to teacher A, which has the label.", "",
             "| routing | dev (%) | test (%) | mail routed, test (%) |", "|---|---|---|---|"]
    for name, row in found["defaults"].items():
        lines.append(f"| {name} | {percent(row['dev'])} | {percent(row['test'])} | "
                     f"{percent(row['per_class_test'].get('mail'))} |")
    for title, key in (("label-free", "grid"), ("on the seen texts", "seen_grid")):
        grid = found.get(key) or {}
        if not grid:
            continue
        lines += ["", f"Best settings on dev, {title} (of {len(grid)} tried; test beside):", "",
                  "| routing · settings | dev (%) | test (%) |", "|---|---|---|"]
        for routing in ("mahalanobis", "knn"):
            best = representations.best_on_dev(grid, routing)
            worst = min((n for n, r in grid.items() if r["routing"] == routing),
                        key=lambda n: grid[n]["dev"])
            for name in (best, worst):
                lines.append(f"| {name}{' (worst on dev)' if name == worst else ''} | "
                             f"{percent(grid[name]['dev'])} | {percent(grid[name]['test'])} |")
    for mode, words in OTHER_REPRESENTATIONS.items():
        if found.get(mode):
            lines += ["", f"{words} instead of the head's input (`[scoring] representation = "
                      f"\"{mode}\"`, kiwb's other settings):", ""]
            lines += representations.render_rows(found[mode], f"routing · {mode}")
    if found.get("combinations"):
        lines += ["", "Combined with the confidence routings (the mean of the two per-teacher "
                  "quantile scores):", ""]
        lines += representations.render_rows(found["combinations"], "routing")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=debian8.PRESETS, default="cpu")
    parser.add_argument("--seeds", type=int, default=1, help="student seeds")
    parser.add_argument("--no-students", action="store_true", help="routing tables only")
    parser.add_argument("--no-few-label-students", action="store_true",
                        help="leave out the students of the best 64-label routing")
    parser.add_argument("--reuse-tables", action="store_true",
                        help="keep the routing tables of the last run (routing.json) and go on "
                        "to the students")
    parser.add_argument("--other-representations", action="store_true",
                        help="only measure the mean and [CLS] representations beside the head's "
                        "input, on the projects already scored (routing.json keeps the rest)")
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
    seen = write_seen(out, data)
    if args.other_representations:
        results_path = out / "routing.json"
        results = json.loads(results_path.read_text()) if results_path.exists() else {}
        found = results.setdefault("representation", {})
        other_representations(project, test_view, views_writer(
            project, test_view, data, teachers, base, preset), log, found)
        results_path.write_text(json.dumps(results, indent=2))
        for mode in OTHER_REPRESENTATIONS:
            print("\n".join(representations.render_rows(found[mode], f"routing · {mode}")))
        return
    debian8.write_config(project, teachers, data["train"], data["dev"], base, preset, label_unlabeled=True)
    debian8.write_config(test_view, teachers, data["test"], None, base, preset, label_unlabeled=True)
    debian8.write_config(labeled_view, teachers, labeled, None, base, preset, label_unlabeled=True)
    results_path = out / "routing.json"
    previous = json.loads(results_path.read_text()) if results_path.exists() else {}
    stages = previous.get("stages", {})
    for folder in (project, test_view, labeled_view):  # cached where done
        before = representation_rows(folder)
        measured = debian8.kiwb("score", folder, "--representations", "--foreground", log=log)
        if representation_rows(folder) > before:  # representations added to cached scores
            stages[f"represent_{folder.name}"] = {k: v for k, v in measured.items() if k != "stdout"}
    reuse = args.reuse_tables and previous.get("representation", {}).get("cls")
    # students evaluated by an earlier run (other methods or seeds) stay in the table
    results = {"preset": args.preset, "labeled_seed": LABEL_SEED,
               "tables": previous["tables"] if reuse else routing_tables(project, test_view, labeled_view),
               "students": previous.get("students", {}), "stages": stages,
               "representation": previous.get("representation", {})}

    def save() -> None:
        results_path.write_text(json.dumps(results, indent=2))

    save()
    if not reuse:
        representation_tables(out, project, test_view, data, teachers, base, preset, seen,
                              results, save)
    print(render(results))
    if not args.no_students:
        students(out, project, data, teachers, base, preset, labeled, results["tables"], args.seeds,
                 args.methods.split(","), results, results_path,
                 few_label=not args.no_few_label_students, seen=seen)
    from report import write_section

    write_section(f"routing {args.preset}", "benchmarks/routing.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
