"""Killing kiwb's jobs at random moments (issue 59): score, integrate, train, export and
labels import, each SIGKILLed at a moment drawn at random from the time its uninterrupted run
takes, then checked: the store opens and SQLite finds nothing wrong in it, no file cut short
is read as whole (shards, checkpoints, an export), a re-run or resume finishes, labels given
before are all there, and the result equals the uninterrupted run's. Shared by
tests/test_crash_points.py (CI) and benchmarks/crash_points.py (more points, BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cli_helpers import kiwb_env, run_kiwb, write_project
from tiny import make_texts, write_jsonl

KINDS = ("score", "integrate", "train", "export", "labels import")
TRAINING = """
[training]
epochs = 2.0
min_steps = 0
learning_rate = 0.006
batch_size = 8
eval_every = 3
warmup_ratio = 0.1
"""
EXPORT_RUN = "muki-hard"


@dataclass
class Trial:
    """One kill: when, whether the job was still running, and each invariant as it held."""

    kind: str
    delay: float
    killed: bool
    held: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(self.held.values())


@dataclass
class Bench:
    """The projects every trial of a kind starts from, built once, and the uninterrupted
    runs' results the trials are compared with."""

    root: Path
    fresh: Path        # kiwb.toml and data, nothing scored
    scored: Path       # scored
    integrated: Path   # and integrated
    trained: Path      # and a run of EXPORT_RUN trained
    labeled: Path      # integrated, with labels given, and a label file to import over them
    label_file: Path
    timings: dict[str, float] = field(default_factory=dict)
    reference: dict[str, object] = field(default_factory=dict)

    def start(self, kind: str) -> Path:
        """The project a trial of `kind` starts from."""
        return {"score": self.fresh, "integrate": self.scored, "train": self.integrated,
                "export": self.trained, "labels import": self.labeled}[kind]


def build(root: Path, teachers_dir: Path, student_base: Path) -> Bench:
    """The starting projects and the uninterrupted runs of each kind (their timings bound the
    random kill moments)."""
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(64, seed=81)])
    write_jsonl(root / "eval.jsonl", make_texts(24, seed=82))
    fresh = write_project(root / "fresh", {"a": teachers_dir / "teacher_a",
                                           "b": teachers_dir / "teacher_b"},
                          root / "pool.jsonl", root / "eval.jsonl",
                          extra=f'{TRAINING}student = "{student_base}"\n')
    bench = Bench(root, fresh, root / "scored", root / "integrated", root / "trained",
                  root / "labeled", root / "labels.csv")
    shutil.copytree(fresh, bench.scored)
    bench.timings["score"] = _timed(root, "score", bench.scored, "--foreground")
    bench.reference["score"] = score_arrays(bench.scored)
    shutil.copytree(bench.scored, bench.integrated)
    bench.timings["integrate"] = _timed(root, "integrate", bench.integrated, "--foreground")
    bench.reference["integrate"] = integration_of(bench.integrated)
    shutil.copytree(bench.integrated, bench.trained)
    bench.timings["train"] = _timed(root, "train", bench.trained, "--run", EXPORT_RUN,
                                    "--foreground")
    bench.reference["train"] = final_weights(bench.trained)
    reference_export = root / "reference-export"
    bench.timings["export"] = _timed(root, "export", bench.trained, "--run", EXPORT_RUN,
                                     "--to", reference_export, "--foreground")
    bench.reference["export"] = export_files(reference_export)
    shutil.copytree(bench.integrated, bench.labeled)
    given = root / "given.csv"
    given.write_text("text,label\n" + "".join(f'"{row["text"]}",sports\n'
                                             for row in make_texts(40, seed=83)))
    run_kiwb("labels", "import", bench.labeled, given, cwd=root)
    bench.label_file.write_text("text,label\n" + "".join(
        f'"{row["text"]}",{row["label"]}\n' for row in make_texts(400, seed=84)))
    probe = root / "probe"
    shutil.copytree(bench.labeled, probe)
    bench.timings["labels import"] = _timed(root, "labels", "import", probe,
                                            bench.label_file, "--replace")
    bench.reference["labels import"] = given_labels(probe)
    bench.reference["labels before"] = given_labels(bench.labeled)
    return bench


def _timed(root: Path, *args) -> float:
    """Seconds an uninterrupted `kiwb ARGS` takes, start-up included."""
    started = time.monotonic()
    run_kiwb(*args, cwd=root)
    return time.monotonic() - started


def trial(bench: Bench, kind: str, number: int, rng: random.Random) -> Trial:
    """Kill one run of `kind` at a random moment of its uninterrupted time, then check.

    A run that ends before its kill (the machine ran it faster than when the uninterrupted run
    was timed: another test or job has stopped sharing its cores) is run again on a fresh copy
    with the moment halved, up to three times, so that a trial is a kill."""
    folder = bench.root / "trials" / f"{kind.replace(' ', '-')}-{number:03d}"
    project = folder / "proj"
    args = {"score": ("score", project, "--foreground"),
            "integrate": ("integrate", project, "--foreground"),
            "train": ("train", project, "--run", EXPORT_RUN, "--foreground"),
            "export": ("export", project, "--run", EXPORT_RUN, "--to", folder / "export",
                       "--foreground"),
            "labels import": ("labels", "import", project, bench.label_file, "--replace")}[kind]
    delay = rng.uniform(0.0, bench.timings[kind])
    for _attempt in range(4):
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(bench.start(kind), project)
        killed = _kill_after(args, folder, delay)
        if killed:
            break
        delay /= 2
    result = Trial(kind, round(delay, 3), killed)
    check(bench, kind, project, folder, result)
    return result


def _kill_after(args, folder: Path, delay: float) -> bool:
    """Run `kiwb ARGS`, SIGKILL its whole process group after `delay` s; whether it was still
    running then."""
    with open(folder / "killed.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "kiwb", *map(str, args)], cwd=folder,
                                   env=kiwb_env(), stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            process.wait(timeout=delay)
            return False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return True


def check(bench: Bench, kind: str, project: Path, folder: Path, result: Trial) -> None:
    """The invariants after a kill, each recorded in `result.held`."""
    from kiwb.project.shard_files import problem_with, read_bytes
    from kiwb.project.store import Store
    from kiwb.workers.checkpoints import checkpoint_problem

    store_file = project / "store.sqlite"
    held = result.held
    try:
        with Store(store_file) as store:
            held["store opens"] = store.connection.execute(
                "PRAGMA integrity_check").fetchone()[0] == "ok"
            whole = True
            for record in store.connection.execute("SELECT key, meta_json FROM score_sets"):
                size = json.loads(record["meta_json"])["shard_size"]
                for shard, facts in store.shard_records(record["key"]).items():
                    data = read_bytes(project / "scores" / record["key"] / f"shard-{shard:06d}.npz")
                    whole = whole and problem_with(data, facts, shard * size) is None
        held["no shard read half-written"] = whole
    except Exception as error:  # recorded as an invariant that failed, with what was raised
        held["store opens"] = False
        result.notes.append(f"store: {type(error).__name__}: {error}")
    checkpoints = sorted((project / "runs").glob("*/checkpoints/step-*"))
    held["no checkpoint half-written"] = all(checkpoint_problem(path) is None
                                             and (path / "model.safetensors").is_file()
                                             for path in checkpoints)
    if kind == "export":
        target = folder / "export"
        held["no export half-written"] = (not target.exists()
                                          or export_files(target) == bench.reference["export"])
    if kind == "labels import":  # all or nothing: the labels before, or the file's
        now = given_labels(project)
        held["labels all there"] = now in (bench.reference["labels before"],
                                           bench.reference["labels import"])
    rerun = {"score": ("score", project),
             "integrate": ("integrate", project),
             "train": ("train", project, "--run", EXPORT_RUN, "--resume", "--foreground"),
             "export": ("export", project, "--run", EXPORT_RUN, "--to", folder / "export",
                        "--force"),
             "labels import": ("labels", "import", project, bench.label_file, "--replace")}[kind]
    finished = run_kiwb(*rerun, cwd=folder, check=False)
    held["re-run finishes"] = finished.returncode == 0
    if finished.returncode != 0:
        result.notes.append(finished.stderr.strip().splitlines()[-1] if finished.stderr else "")
        return
    same = {"score": lambda: _same_arrays(score_arrays(project), bench.reference["score"]),
            "integrate": lambda: integration_of(project) == bench.reference["integrate"],
            "train": lambda: final_weights(project) == bench.reference["train"],
            "export": lambda: export_files(folder / "export") == bench.reference["export"],
            "labels import": lambda: given_labels(project) == bench.reference["labels import"]}
    held["same as uninterrupted"] = same[kind]()
    if kind == "labels import":  # the labels given before are kept in the history
        with sqlite3.connect(project / "store.sqlite") as db:
            kept = {row[0]: row[1] for row in db.execute(
                "SELECT text, label FROM label_set_rows WHERE set_id = (SELECT MIN(id) FROM "
                "label_sets)")}
        held["labels before kept"] = kept == bench.reference["labels before"]


# A job run without --foreground is a detached worker in a session of its own, which a kill
# of the command that follows it leaves running: every job here runs in the foreground, in
# the process the trial kills.

# -- what a project holds, to compare -------------------------------------------------------

def score_arrays(project: Path) -> dict:
    import numpy as np

    found = {}
    with sqlite3.connect(project / "store.sqlite") as db:
        for key, dataset, shards in db.execute("SELECT key, dataset, num_shards FROM score_sets"):
            parts = [np.load(project / "scores" / key / f"shard-{shard:06d}.npz")
                     for shard in range(shards)]
            found[(key, dataset)] = {name: np.concatenate([part[name] for part in parts])
                                     for name in parts[0].files}
    return found


def _same_arrays(found: dict, expected: dict) -> bool:
    import numpy as np

    return found.keys() == expected.keys() and all(
        found[key].keys() == expected[key].keys()
        and all(np.allclose(found[key][name], expected[key][name], rtol=0, atol=1e-6)
                for name in expected[key]) for key in expected)


def integration_of(project: Path) -> dict:
    """The newest integration's targets and margins, as the store holds them."""
    with sqlite3.connect(project / "store.sqlite") as db:
        key = db.execute("SELECT key FROM integrations ORDER BY created_at DESC").fetchone()[0]
        rows = db.execute("SELECT row, routed, target, round(margin, 6) FROM instances WHERE "
                          "integration = ? ORDER BY row", (key,)).fetchall()
    return {"key": key, "rows": rows}


def final_weights(project: Path) -> dict:
    """The last checkpoint's step and tensors, as lists (what training reached)."""
    from safetensors.numpy import load_file

    last = sorted((project / "runs" / EXPORT_RUN / "checkpoints").glob("step-*"))[-1]
    tensors = load_file(last / "model.safetensors")
    return {"step": last.name, **{name: value.tobytes() for name, value in tensors.items()}}


def export_files(folder: Path) -> dict:
    """The exported model's files (the model card's and manifest's text aside: they name
    paths), by name."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())
            if path.is_file() and path.suffix not in (".md", ".json")}


def given_labels(project: Path) -> dict:
    with sqlite3.connect(project / "store.sqlite") as db:
        return {row[0]: row[1] for row in db.execute("SELECT text, label FROM text_labels")}
