"""Experiment trackers a run reports to (`[training] report_to`, HF TrainingArguments' names):
TensorBoard, Weights & Biases and MLflow. Each gets, from rank 0 only, what kiwb's store gets
from the training loop (kiwb.project.records' train events): the losses and learning rate,
the eval figures and the student's fit to its targets per step, the run's settings at its
start, and its best checkpoint's figures at its end. A tracker's package is an optional extra
(kiwb.project.trackers checks it before the job starts). The store stays kiwb's record: a
tracker that fails to log is said once in the log and dropped, never the run's end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kiwb.console import console
from kiwb.project.atomic import atomic_write_text
from kiwb.project.records import (
    TrainCheck,
    TrainDone,
    TrainEval,
    TrainStart,
    TrainStep,
    TrainStopped,
)


def scalars(event) -> dict[str, float]:
    """The figures of one train event under the names a tracker shows."""
    if isinstance(event, TrainStep):
        return {"train/loss": event.loss, "train/learning_rate": event.lr,
                "train/texts_per_s": event.texts_per_s}
    if isinstance(event, TrainEval):
        found = {f"eval/{event.metric.replace(' ', '_')}": event.accuracy,
                 "eval/macro_f1": event.macro_f1}
        if event.fit is not None:
            found["train/fit"] = event.fit
        if event.routing_accuracy is not None and event.routing_accuracy.chosen is not None:
            found["eval/routing_accuracy"] = event.routing_accuracy.chosen
        return found
    if isinstance(event, TrainCheck) and event.fit is not None:
        return {"train/fit": event.fit}
    return {}


def final_figures(event: TrainDone) -> dict[str, float]:
    """The best checkpoint's figures, for a tracker's run summary."""
    best = event.best
    if best is None:
        return {}
    found = {"best/step": float(best.step)}
    if best.accuracy is not None:
        found[f"best/{(best.metric or 'accuracy').replace(' ', '_')}"] = best.accuracy
    if best.fit is not None:
        found["best/fit"] = best.fit
    return found


class _TensorBoard:
    name = "tensorboard"
    id = None  # its log folder is the run's: a resumed run writes on into it

    def __init__(self, run: str, folder: Path, settings: dict, resume: str | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder / "tensorboard"))
        self.writer.add_text("settings", "\n".join(f"    {key}: {value}"
                                                   for key, value in flat(settings).items()))

    def log(self, figures: dict[str, float], step: int) -> None:
        for name, value in figures.items():
            self.writer.add_scalar(name, value, step)

    def summary(self, figures: dict[str, float], step: int) -> None:
        self.log(figures, step)

    def close(self, outcome: str) -> None:
        self.writer.close()


class _WandB:
    name = "wandb"

    def __init__(self, run: str, folder: Path, settings: dict, resume: str | None = None) -> None:
        import os

        import wandb

        # WANDB_MODE (offline), WANDB_DIR and the like are wandb's to read; the W&B project is
        # WANDB_PROJECT's, else the kiwb project's name
        self.run = wandb.init(name=run, config=flat(settings), dir=str(folder),
                              project=os.environ.get("WANDB_PROJECT") or settings.get("project"),
                              reinit="create_new", job_type="kiwb-train",
                              id=resume, resume="allow" if resume else None)
        self.id = self.run.id

    def log(self, figures: dict[str, float], step: int) -> None:
        self.run.log(figures, step=step)

    def summary(self, figures: dict[str, float], step: int) -> None:
        self.run.summary.update(figures)

    def close(self, outcome: str) -> None:
        self.run.finish(exit_code=0 if outcome == "finished" else 1)


class _MLflow:
    name = "mlflow"

    def __init__(self, run: str, folder: Path, settings: dict, resume: str | None = None) -> None:
        import os

        import mlflow

        # MLFLOW_TRACKING_URI is mlflow's to read; the experiment is MLFLOW_EXPERIMENT_NAME's,
        # else the kiwb project's name
        self.mlflow = mlflow
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME") or settings.get("project"))
        if resume:  # the run a resumed kiwb run reported to: its curves go on
            self.run = mlflow.start_run(run_id=resume)
        else:
            self.run = mlflow.start_run(run_name=run)
            mlflow.log_params({key: str(value)[:500] for key, value in flat(settings).items()})
        self.id = self.run.info.run_id

    def log(self, figures: dict[str, float], step: int) -> None:
        self.mlflow.log_metrics(figures, step=step)

    def summary(self, figures: dict[str, float], step: int) -> None:
        self.mlflow.log_metrics(figures, step=step)

    def close(self, outcome: str) -> None:
        self.mlflow.end_run(status={"finished": "FINISHED", "stopped": "KILLED"}.get(
            outcome, "FAILED"))


IDS_FILE = "trackers.json"  # in the run's folder: the W&B and MLflow runs it reports to
TRACKER_TYPES = {tracker.name: tracker for tracker in (_TensorBoard, _WandB, _MLflow)}


def flat(settings: dict, prefix: str = "") -> dict[str, Any]:
    """Nested settings as "section.key" pairs (what trackers' parameter tables hold)."""
    found = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            found.update(flat(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


class Trackers:
    """The trackers of one run (none: every call does nothing). Started at the run's first
    event, fed every train event after it, closed at its end."""

    def __init__(self, names: tuple[str, ...], run: str, folder: Path, settings: dict):
        self.names, self.run, self.folder, self.settings = names, run, folder, settings
        self.open: list = []
        self.started = False

    def record(self, event) -> None:
        if not self.names:
            return
        if isinstance(event, TrainStart) and not self.started:
            self.started = True
            ids = self._ids()  # a resumed run goes on in the trackers' runs it started
            for name in self.names:
                self._guarded(name, lambda name=name: self.open.append(
                    TRACKER_TYPES[name](self.run, self.folder, self.settings, ids.get(name))))
            self._keep_ids({**ids, **{t.name: t.id for t in self.open if t.id}})
        figures = scalars(event)
        if figures:
            for tracker in list(self.open):
                self._guarded(tracker.name, lambda t=tracker: t.log(figures, event.step), tracker)
        if isinstance(event, TrainDone):
            figures = final_figures(event)
            for tracker in list(self.open):
                self._guarded(tracker.name, lambda t=tracker: t.summary(figures, event.step),
                              tracker)
        if isinstance(event, TrainDone | TrainStopped):
            self.close("finished" if isinstance(event, TrainDone) else "stopped")

    def _ids(self) -> dict[str, str]:
        path = self.folder / IDS_FILE
        try:
            return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except ValueError:  # a torn write: new tracker runs, nothing lost in kiwb's store
            return {}

    def _keep_ids(self, ids: dict[str, str]) -> None:
        if ids:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.folder / IDS_FILE, json.dumps(ids, indent=2))

    def close(self, outcome: str = "failed") -> None:
        """End every tracker's run as `outcome` (finished, stopped or failed); idempotent, so
        a failed run's trainer closes them too."""
        while self.open:
            tracker = self.open.pop()
            self._guarded(tracker.name, lambda t=tracker: t.close(outcome))

    def _guarded(self, name: str, call, tracker=None) -> None:
        try:
            call()
        except Exception as error:  # a tracker's failure is said, not the run's
            console.print(f"report_to {name}: {type(error).__name__}: {error}; kiwb stops "
                          "reporting to it for this run (its store keeps every figure)",
                          style="yellow", highlight=False, markup=False, soft_wrap=True)
            if tracker is not None and tracker in self.open:
                self.open.remove(tracker)
