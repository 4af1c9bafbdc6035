"""`kiwb demo --no-ui`: the whole workflow on the demo project, then the results table.

Scoring, integration, training and export run as recorded jobs in this process, exactly as
`kiwb score / integrate / train / export --foreground` run them (so they show in `kiwb jobs`);
each step reuses what an earlier run finished (cached scores, finished runs).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rich.table import Table

from kiwb.console import FittedTable, console
from kiwb.demo.marks import CHECK_CAPTION, check_cell
from kiwb.demo.recipe import EXPORTED, STUDENTS, TEACHERS
from kiwb.errors import KiwbError
from kiwb.project.job_specs import ExportSpec, IntegrateSpec, JobSpec, ScoreSpec, TrainSpec
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import IntegrationRecord
from kiwb.project.store import Store
from kiwb.project.teacher_kinds import load_project
from kiwb.workers import checkpoints as ckpt
from kiwb.workers.evaluate import evaluate_checkpoint
from kiwb.workers.export import choose_checkpoint
from kiwb.workers.project_inputs import load_dataset_role
from kiwb.workers.runner import run_in_foreground
from kiwb.workers.runtime import resolve_device


def run_headless(root: Path, students: dict[str, dict] = STUDENTS,
                 exported_run: str = EXPORTED) -> dict:
    """Score, integrate, train every method (`students`: name -> integration settings),
    evaluate and export the `exported_run` student; return the figures."""
    project = load_project(root)
    config = project.config
    paths = ProjectPaths(config.root)
    paths.make_layout()
    with Store(paths.store) as store:
        run_step(store, ScoreSpec())
        integration = run_step(store, IntegrateSpec())["integration"]
        summary = IntegrationRecord.from_dict(store.integration(integration)).summary
        references = summary.eval
        runs = {name: train(store, TrainSpec(**overrides).named(
            config.integration, project.kind.jobs.default_routing))
                for name, overrides in students.items()}
        exported = paths.exports / runs[exported_run]
        run_step(store, ExportSpec(run=runs[exported_run], destination=str(exported), force=True))
    evaluation = load_dataset_role(config, "eval", project.kind)
    device = resolve_device(config.training.device)
    figures = {}
    for name, run in runs.items():
        checkpoint = choose_checkpoint(config.root, run, "best")
        figures[name] = evaluate_checkpoint(checkpoint, evaluation, device,
                                            config.training.batch_size, config.training.max_length)
        figures[name]["check"] = learning_check(config.root, run)
    details = summary.details or {}
    routing = references.routing_accuracy if references is not None else None
    # a multi-task integration's references are per task (each task's Ensemble, each teacher)
    tasks = {task: found["eval"] for task, found in (details.get("tasks") or {}).items()}
    # an embedding integration's: the probes of each teacher alone and of their combinations
    probes = (details.get("eval") or {}).get("rows") if summary.teachers_kind == "embedding" else None
    return {"teachers": references.teacher_accuracy if references is not None else None,
            "ensemble": references.ensemble_accuracy if references is not None else None,
            # the students' routing, named as the integration resolved it
            "routing": ({**routing.to_dict(), "routing": summary.routed_by}
                        if routing is not None else None), "students": figures,
            "eval_texts": (references.num_texts if references is not None
                           else (details.get("eval") or {}).get("texts")),
            "exported": str(exported), **({"tasks": tasks} if tasks else {}),
            **({"probes": probes} if probes else {})}


def run_step(store: Store, spec: JobSpec) -> dict:
    """Run one job of the demo here; what its ending recorded (KiwbError if it did not finish)."""
    job_id, exit_code = run_in_foreground(store, spec, str(store.path.parent))
    job = store.jobs.get(job_id)
    if exit_code != 0 or job.status != "finished":
        raise KiwbError(f"the demo's job {job_id} ({job.label}) ended {job.status}: "
                        f"{job.error or 'see kiwb jobs'}")
    return job.ending or {}


def train(store: Store, spec: TrainSpec) -> str:
    """Train (or finish, or reuse) one student; returns its run name."""
    existing = ckpt.list_checkpoints(ProjectPaths(store.path.parent).run_dir(spec.run))
    if existing and _finished(existing[-1]):
        console.print(f"Run {spec.run} is finished from an earlier run.")
        return spec.run
    run_step(store, dataclasses.replace(spec, resume=bool(existing)))
    return spec.run


def learning_check(root: Path, run: str) -> dict | None:
    """The learning check of the checkpoint a run keeps, as the run settled it."""
    return (ckpt.read_best(ProjectPaths(root).run_dir(run)) or {}).get("check")


def _finished(checkpoint: Path) -> bool:
    progress = json.loads((checkpoint / ckpt.PROGRESS_FILE).read_text(encoding="utf-8"))
    return progress["step"] >= progress["total_steps"]


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def results_table(results: dict) -> Table:
    """Accuracy on the labeled eval texts: each teacher alone, the Ensemble, each student."""
    labels = sum(len(labels) for labels in TEACHERS.values())
    table = FittedTable(
        title=f"kiwb demo · accuracy on {results['eval_texts']} labeled eval texts",
        caption="A teacher alone is right only on its own labels. Teacher routing: how "
        "often the teacher a routing picks knows the text's true label (the students "
        "use the project's routing; MC dropout and plain confidence compare raw "
        "confidences). " + CHECK_CAPTION)
    table.add_column("method", no_wrap=False)  # the names wrap; the figures keep their width
    table.add_column("accuracy", justify="right")
    table.add_column("macro-F1", justify="right")
    table.add_column("check")
    for name, accuracy in results["teachers"].items():
        known = len(TEACHERS.get(name, ()))
        table.add_row(f"teacher {name} alone ({known} of {labels} labels)", _percent(accuracy), "", "")
    table.add_row("Ensemble (no training)", _percent(results["ensemble"]), "", "")
    table.add_section()
    for name, report in results["students"].items():
        table.add_row(f"student · {name}", _percent(report["accuracy"]), _percent(report["macro_f1"]),
                      check_cell(report))
    table.add_section()
    routing = results["routing"]
    if routing.get("routing"):
        table.add_row(f"teacher routing · {routing['routing']} (the students')",
                      _percent(routing["chosen"]), "", "")
    table.add_row("teacher routing · MC dropout", _percent(routing["mc_dropout"]), "", "")
    table.add_row("teacher routing · plain confidence", _percent(routing["plain_confidence"]), "", "")
    return table
