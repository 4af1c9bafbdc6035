"""`kiwb demo --no-ui`: the whole workflow on the demo project, then the results table.

It calls what `kiwb score / integrate / train / evaluate / export` call, in order; each
step reuses what an earlier run finished (cached scores, finished runs).
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from kiwb.console import console, progress_bar
from kiwb.demo.recipe import EXPORTED, STUDENTS, TEACHERS
from kiwb.project.config import ProjectConfig, load_config
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers import checkpoints as ckpt
from kiwb.workers.evaluate import evaluate_checkpoint
from kiwb.workers.export import choose_checkpoint, export_student
from kiwb.workers.integrate import IntegrationSettings, run_integration
from kiwb.workers.project_inputs import load_dataset_role
from kiwb.workers.runtime import prepare_device, resolve_device
from kiwb.workers.score import pending_texts, plan_scoring, register_tasks, run_scoring
from kiwb.workers.train import Trainer, TrainRequest, default_run_name, prepare


def run_headless(root: Path) -> dict:
    """Score, integrate, train every method, evaluate and export; return the figures."""
    config = load_config(root)
    paths = ProjectPaths(config.root)
    paths.make_layout()
    with Store(paths.store) as store:
        score(config, store)
        summary = run_integration(config, store, IntegrationSettings.from_config(config))["eval"]
        runs = {name: train(config, store, settings) for name, settings in STUDENTS.items()}
    evaluation = load_dataset_role(config, "eval")
    device = resolve_device(config.training.device)
    students = {}
    for name, run in runs.items():
        checkpoint = choose_checkpoint(config.root, run, "best")
        students[name] = evaluate_checkpoint(checkpoint, evaluation, device,
                                             config.training.batch_size, config.training.max_length)
        students[name]["check"] = learning_check(config.root, run)
    exported = export_student(config.root, runs[EXPORTED], paths.exports / runs[EXPORTED], force=True)
    return {"teachers": summary["teacher_accuracy"], "ensemble": summary["ensemble_accuracy"],
            "routing": summary["routing_accuracy"], "students": students,
            "eval_texts": summary["num_texts"], "exported": str(exported)}


def score(config: ProjectConfig, store: Store) -> None:
    """Every teacher's MC-dropout scores of the pool and the eval texts (cached)."""
    device = resolve_device(config.scoring.device)
    prepare_device(device)
    tasks = plan_scoring(config, store, device)
    register_tasks(store, tasks)
    todo = pending_texts(store, tasks)
    if todo == 0:
        console.print("Scores are cached from an earlier run.")
        return
    console.print(f"Scoring {todo:,} text×teacher pairs (K = {config.scoring.mc_passes} "
                  "MC-dropout passes each)")
    with progress_bar("scoring", total=todo) as advance:
        run_scoring(config, store, tasks, device=device, progress=advance)


def train(config: ProjectConfig, store: Store, overrides: dict) -> str:
    """Train (or finish, or reuse) one student; returns its run name."""
    settings = IntegrationSettings.from_config(config, **overrides)
    run = default_run_name(settings)
    existing = ckpt.list_checkpoints(ProjectPaths(config.root).run_dir(run))
    if existing and _finished(existing[-1]):
        console.print(f"Run {run} is finished from an earlier run.")
        return run
    request = TrainRequest(run=run, settings=settings, resume=bool(existing))
    device = resolve_device(config.training.device)
    prepare_device(device)  # each student's peak memory is its own
    trainer = Trainer(config, store, request, prepare(config, store, request), device)
    trainer.setup()
    with progress_bar(f"train {run}", total=trainer.total_steps - trainer.step, unit="steps") as advance:
        trainer.run(progress=lambda n, loss: advance(f"train {run} · loss {loss:.4f}", n))
    return run


def learning_check(root: Path, run: str) -> dict | None:
    """The learning check of the checkpoint a run keeps, as its last checkpoint records it."""
    last = ckpt.list_checkpoints(ProjectPaths(root).run_dir(run))[-1]
    return (ckpt.read_progress(last).get("best") or {}).get("check")


def _finished(checkpoint: Path) -> bool:
    progress = json.loads((checkpoint / ckpt.PROGRESS_FILE).read_text(encoding="utf-8"))
    return progress["step"] >= progress["total_steps"]


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """Accuracy on the labeled eval texts: each teacher alone, the Ensemble, each student."""
    labels = sum(len(labels) for labels in TEACHERS.values())
    table = Table(title=f"kiwb demo · accuracy on {results['eval_texts']} labeled eval texts",
                  caption="A teacher alone is right only on its own labels. Teacher routing: how "
                  "often the teacher a routing picks knows the text's true label (the students "
                  "use the project's routing; MC dropout and plain entropy compare raw "
                  "confidences).")
    table.add_column("method")
    table.add_column("accuracy", justify="right")
    table.add_column("macro-F1", justify="right")
    for name, accuracy in results["teachers"].items():
        known = len(TEACHERS.get(name, ()))
        table.add_row(f"teacher {name} alone ({known} of {labels} labels)", _percent(accuracy), "")
    table.add_row("Ensemble (no training)", _percent(results["ensemble"]), "")
    table.add_section()
    for name, report in results["students"].items():
        table.add_row(f"student · {name}", _percent(report["accuracy"]), _percent(report["macro_f1"]))
    table.add_section()
    routing = results["routing"]
    if routing.get("routing"):
        table.add_row(f"teacher routing · {routing['routing']} (the students')",
                      _percent(routing["chosen"]), "")
    table.add_row("teacher routing · MC dropout", _percent(routing["mc_dropout"]), "")
    table.add_row("teacher routing · plain entropy", _percent(routing["plain_entropy"]), "")
    return table
