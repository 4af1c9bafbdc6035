"""Two kiwb jobs on one machine: how much each slows the other, before and after kiwb shares
the cores between them (kiwb/workers/cpu_share.py).

    python benchmarks/shared_machine.py            # needs benchmarks/out/cpu/teacher_A
    python benchmarks/shared_machine.py --texts 64 --passes 8

Each job scores the same texts with the debian-8 teachers A and B (MC dropout, from scratch, in a
project of its own). Measured in one run, on a machine with nothing else running:
- alone: one job;
- before: two jobs at once, each with as many torch threads as cores (torch's default, what
  every kiwb job took before; OMP_NUM_THREADS = cores reproduces it);
- after: two jobs at once, sharing: each takes cores // running jobs.
Writes benchmarks/out/shared-machine.json and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kiwb.workers.cpu_share import machine_cores  # noqa: E402


def make_project(folder: Path, teachers: Path, texts: Path, passes: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "kiwb.toml").write_text("\n".join([
        'name = "shared-machine"', "[[teachers]]", 'name = "A"', f'path = "{teachers}/teacher_A"',
        "[[teachers]]", 'name = "B"', f'path = "{teachers}/teacher_B"', "[data.unlabeled]", f'path = "{texts}"', "[scoring]", f"mc_passes = {passes}",
        "batch_size = 32", "max_length = 128", 'device = "cpu"']) + "\n", encoding="utf-8")
    return folder


def start(project: Path, env: dict, *options: str) -> tuple[subprocess.Popen, float]:
    process = subprocess.Popen([sys.executable, "-m", "kiwb", "score", str(project), *options],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, time.perf_counter()


def finish(process: subprocess.Popen, started: float) -> tuple[float, str]:
    output, _ = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"a scoring job failed:\n{output[-3000:]}")
    return seconds, output


def measure(work: Path, teachers: Path, texts: Path, passes: int, jobs: int, env: dict,
            name: str, *options: str) -> dict:
    projects = [make_project(work / f"{name}-{number}", teachers, texts, passes)
                for number in range(jobs)]
    running = [start(project, env, *(options or ("--foreground",))) for project in projects]
    results = [finish(process, started) for process, started in running]
    lines = sorted({line.strip() for _, output in results for line in output.splitlines()
                    if line.startswith("CPU threads")})
    return {"seconds": [round(seconds, 1) for seconds, _ in results], "thread_lines": lines}


def render(results: dict) -> str:
    alone = results["alone"]["seconds"][0]
    rows = [("one job alone", results["alone"]), ("two jobs, before (each takes every core)",
                                                  results["before"]),
            ("two jobs, after (cores shared)", results["after"]),
            ("one job on two CPU ranks (--devices cpu,cpu)", results["ranks"])]
    lines = ["## Two jobs on one machine", "",
             f"Each job MC-scores {results['texts']} debian-8 test texts with teachers A and B (K = "
             f"{results['passes']}) from scratch, on {results['cores']} cores; the jobs of a "
             "row start together. Slowdown: a job's wall time over the lone job's. Throughput: "
             "text×teacher pairs scored per second by all the row's jobs together. The last row is the "
             "scaling of one job over processes on this CPU (two ranks share the two cores: "
             "no GPU was lent).", "",
             "| jobs | wall time per job (s) | slowdown | throughput (pairs/s) |", "|---|---|---|---|"]
    for name, row in rows:
        seconds = row["seconds"]
        slowdown = " / ".join(f"{value / alone:.2f}×" for value in seconds)
        throughput = len(seconds) * 2 * results["texts"] / max(seconds)
        lines.append(f"| {name} | {' / '.join(f'{value:.1f}' for value in seconds)} | "
                     f"{slowdown} | {throughput:.1f} |")
    lines += ["", "What the jobs logged: " + "; ".join(
        f"`{line}`" for line in results["after"]["thread_lines"]) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=96)
    parser.add_argument("--passes", type=int, default=8)
    parser.add_argument("--render", action="store_true", help="only re-render BENCHMARKS.md")
    args = parser.parse_args()
    out = HERE / "out" / "shared-machine.json"
    from report import write_section

    if args.render:
        write_section("shared machine", "benchmarks/shared_machine.py",
                      render(json.loads(out.read_text())))
        return
    teachers = HERE / "out" / "cpu"
    if not (teachers / "teacher_B" / "config.json").exists():
        raise SystemExit(f"{teachers}/teacher_A and _B are missing: run benchmarks/debian8.py "
                         "(or labels.py) first")
    cores = machine_cores()
    work = Path(tempfile.mkdtemp(prefix="kiwb-shared-"))
    try:
        texts = work / "texts.jsonl"
        rows = (HERE / "out" / "cpu" / "test.jsonl").read_text().splitlines()[:args.texts]
        texts.write_text("\n".join(rows) + "\n", encoding="utf-8")
        base = {key: value for key, value in os.environ.items()
                if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        base.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                    KIWB_CPU_SHARE_DIR=str(work / "running"))
        every_core = {**base, "OMP_NUM_THREADS": str(cores)}
        results = {"texts": len(rows), "passes": args.passes, "cores": cores,
                   "alone": measure(work, teachers, texts, args.passes, 1, base, "alone"),
                   "before": measure(work, teachers, texts, args.passes, 2, every_core, "before"),
                   "after": measure(work, teachers, texts, args.passes, 2, base, "after"),
                   "ranks": measure(work, teachers, texts, args.passes, 1, base, "ranks",
                                    "--devices", "cpu,cpu")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    write_section("shared machine", "benchmarks/shared_machine.py", render(results))
    print(render(results))


if __name__ == "__main__":
    main()
