"""Turn benchmarks/out/PRESET/results.json into the tables of BENCHMARKS.md."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["vanilla-kd", "uhc", "muki-hard", "muki-soft", "muki-hard-no-mc", "muki-hard-no-reweight",
         "supervised"]
NAMES = {"vanilla-kd": "Vanilla KD", "uhc": "UHC", "muki-hard": "MUKI-Hard", "muki-soft": "MUKI-Soft",
         "muki-hard-no-mc": "MUKI-Hard w/o MC dropout",
         "muki-hard-no-reweight": "MUKI-Hard w/o re-weighting", "supervised": "Supervised (upper bound)"}


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal, "–" when it was not measured."""
    return "–" if value is None else f"{100 * value:.1f}"


def _pct(values: list[float]) -> str:
    if len(values) == 1:
        return f"{100 * values[0]:.1f}"
    return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}"


def per_teacher(summary: dict, fact: str, legacy: str) -> dict:
    """teacher -> `fact` of a `kiwb integrate --json` summary: its per_teacher records, or the
    mapping `legacy` a results file written before them holds."""
    if "per_teacher" not in summary:
        return summary[legacy]
    return {each["name"]: each[fact] for each in summary["per_teacher"] if fact in each}


def accuracy_table(results: dict) -> list[str]:
    test = results["test_integration"]
    lines = ["| method | test accuracy (%) | seeds |", "|---|---|---|"]
    for teacher, value in per_teacher(test, "accuracy", "teacher_accuracy").items():
        lines.append(f"| Teacher {teacher} alone | {100 * value:.1f} | – |")
    lines.append(f"| Ensemble | {100 * test['ensemble_accuracy']:.1f} | – |")
    for run in ORDER:
        values = results["accuracy"].get(run)
        if values:
            lines.append(f"| {NAMES[run]} | {_pct(values)} | {len(values)} |")
    routing = test["routing_accuracy"]
    lines += ["", "| teacher routing on test | accuracy (%) |", "|---|---|",
              f"| MC-dropout confidence (K = 16) | {100 * routing['mc_dropout']:.1f} |",
              f"| plain confidence (deterministic) | {100 * routing['plain_confidence']:.1f} |"]
    return lines


def confidence_table(results: dict) -> list[str]:
    """Each teacher's confidence on its own labels' texts and on the others' (test split)."""
    found = results.get("confidence")
    if not found:
        return []
    wins = per_teacher(results["test_integration"], "wins", "wins")
    lines = ["| teacher | texts routed to it | MC confidence: own / other texts | plain confidence: "
             "own / other | mutual information: own / other |", "|---|---|---|---|---|"]
    for teacher, figures in found.items():
        cells = [f"{figures[field]['own']:.3f} / {figures[field]['other']:.3f}"
                 for field in ("mc_confidence", "det_confidence", "mutual_information")]
        lines.append(f"| {teacher} | {wins[teacher]} | " + " | ".join(cells) + " |")
    return lines


def speed_table(results: dict) -> list[str]:
    lines = ["| teacher | kiwb (loop) texts/s | kiwb (replicate) texts/s | floor: K × eval forward, texts/s "
             "| reference loop texts/s | kiwb / floor time | reference / kiwb time |",
             "|---|---|---|---|---|---|---|"]
    for teacher, speed in results["speed"].items():
        rate = speed["texts_per_s"]
        lines.append(f"| {teacher} | {rate['kiwb_loop']:.1f} | {rate['kiwb_replicate']:.1f} | "
                     f"{rate['floor']:.1f} | {rate['reference']:.1f} | {speed['vs_floor']:.2f}× | "
                     f"{speed['speedup_vs_reference']:.2f}× |")
    return lines


def stage_table(results: dict) -> list[str]:
    """Work time from the store's job records (summed over a killed job and its resume) and
    the peak memory of the process that did the work, where this script measured it."""
    stages, work = results["stages"], results.get("work_seconds", {})
    lines = ["| stage | work time (s) | peak RSS (MB) |", "|---|---|---|"]
    names = [*stages, *(name for name in work if name not in stages)]
    for stage in sorted(names, key=lambda name: (not name.startswith("score"), names.index(name))):
        # score_memory is there for its peak memory; its time depends on what else ran
        seconds = None if stage == "score_memory" else work.get(stage, stages.get(stage, {}).get("seconds"))
        peak = stages.get(stage, {}).get("peak_rss_mb")
        name = (f"score from scratch, {stages[stage]['texts']} texts (memory)" if stage == "score_memory"
                else stage)
        lines.append(f"| {name} | {seconds if seconds is not None else '–'} | "
                     f"{peak if peak is not None else '–'} |")
    lines += ["", "`score`: the student pool, both teachers; `score_test`: the test split, both teachers. "
              "Work time comes from the project store's job records; peak RSS is that of the process "
              "that did the work, where this script ran it (–: an earlier, cut-short run did)."]
    rates = results.get("train_texts_per_s", {})
    if rates:
        lines += ["", "| student run | training texts/s |", "|---|---|"]
        lines += [f"| {run} | {rate:.1f} |" for run, rate in sorted(rates.items())]
    return lines


def render(results: dict) -> str:
    machine = results["machine"]
    rows = results["rows"]
    settings = results["settings"]
    return "\n".join([
        f"## debian-8, preset `{results['preset']}`", "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, GPU: {machine['gpu'] or 'none'}; "
        f"Python {machine['python']}, torch {machine['torch']}, transformers {machine['transformers']}, "
        f"datasets {machine['datasets']}.", "",
        f"Rows used: teachers' training {rows['teacher_train']}, student pool {rows['train']}, "
        f"dev {rows['dev']}, test {rows['test']} (caps: {settings['teacher_train']}, {settings['train']}, "
        f"{settings['dev']}, {settings['test']}); teachers "
        f"{settings['teacher_epochs']} epochs at lr {settings['teacher_lr']}, students "
        f"{settings['student_epochs']} epochs at lr {settings['student_lr']}, evaluated every "
        f"{settings['eval_every']} steps on dev, best checkpoint evaluated on test. K = 16, max length 128.",
        "", "### Accuracy (8-way, test split)", "", *accuracy_table(results),
        "", "### What the routing compares (test split)", "", *confidence_table(results),
        *(["", "### MC-dropout scoring speed (K = 16, same texts, same run)", "", *speed_table(results),
           "", f"Speed measured on {next(iter(results['speed'].values()))['texts']} test texts per "
           f"teacher, on {next(iter(results['speed'].values())).get('device', 'cpu')}."]
          if results.get("speed") else []),
        "", "### Stages", "", *stage_table(results), ""])


def write_into_benchmarks_md(results: dict, path: Path = HERE.parent / "BENCHMARKS.md") -> None:
    """Replace the preset's generated section of BENCHMARKS.md (between its markers), or
    append one; the hand-written analysis around it stays as it is."""
    write_section(f"debian8 {results['preset']}", "benchmarks/report.py", render(results), path)


def write_section(name: str, script: str, rendered: str,
                  path: Path = HERE.parent / "BENCHMARKS.md") -> None:
    """Replace the generated section `name` of BENCHMARKS.md, or append it."""
    start = f"<!-- generated: {name} ({script}) -->"
    end = f"<!-- end generated: {name} -->"
    block = f"{start}\n{rendered}\n{end}"
    text = path.read_text() if path.exists() else "# kiwb benchmarks\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


if __name__ == "__main__":
    preset = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    results = json.loads((HERE / "out" / preset / "results.json").read_text())
    if "--write" in sys.argv:
        write_into_benchmarks_md(results)
    else:
        print(render(results))
