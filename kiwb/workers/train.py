"""`kiwb train`: train the student on integrated targets (teachers are never run again)."""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable

import torch

from kiwb.console import console
from kiwb.core.choices import SUPERVISED
from kiwb.core.learning_check import LearningCheck, for_method, judged, with_fit, with_funnel
from kiwb.core.target_fit import FIT_FLOOR
from kiwb.core.training_defaults import resolve_learning_rate, total_steps
from kiwb.errors import KiwbError
from kiwb.kinds import TeacherKind, kind_named
from kiwb.project.config import ProjectConfig
from kiwb.project.job_specs import student_missing
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import (
    BestCheckpoint,
    ClassFunnel,
    TrainCheck,
    TrainDone,
    TrainEval,
    TrainEvent,
    TrainStart,
    TrainStep,
    TrainStopped,
)
from kiwb.project.run_manifest import routed_by
from kiwb.project.store import Store
from kiwb.project.teacher_kinds import check_method
from kiwb.workers import checkpoints as ckpt
from kiwb.workers.dropout_check import recorded_dropout
from kiwb.workers.kind_runtimes import runtime_of
from kiwb.workers.runtime import FittedBatch, agreed_training_precision, training_precision_for
from kiwb.workers.score import plan_scoring
from kiwb.workers.trackers import Trackers
from kiwb.workers.training_data import TrainingData, TrainRequest
from kiwb.workers.training_loop import OptimizerSteps, read_losses

LOG_EVERY = 10
# Pool texts the student predicts at each evaluation: its fit to their targets, and without an
# eval set, the learning check on their predicted classes.
POOL_SAMPLE_TEXTS = 512
# [training] mixed_precision -> the autocast dtype it asks for.
AUTOCAST_DTYPES = {"no": "float32", "fp16": "float16", "bf16": "bfloat16"}


def prepare(config: ProjectConfig, store: Store, request: TrainRequest,
            kind: TeacherKind) -> TrainingData:
    """Targets and evaluation data for a run, plus the manifest that pins its inputs, as the
    project's teachers' `kind` (the job's LoadedProject.kind) makes them."""
    if not config.training.student:
        raise KiwbError(student_missing(config))
    tasks = plan_scoring(config, store, kind=kind)
    check_method(config, kind, request.settings.method, request.settings.routing,
                 dataclasses.asdict(request.settings))
    data = runtime_of(kind).prepare_training(config, store, request, tasks)
    # the score sets the targets come from, by teacher: a rescore stops a resume (checkpoints)
    data.manifest["scores"] = {task.teacher.name: task.key for task in tasks
                               if task.dataset == "unlabeled"}
    if request.init_from_merge:
        from kiwb.workers.merge_start import start_from_merge

        start_from_merge(config, request.init_from_merge, data)
    return data


class Trainer:
    """The training loop of one run: resumable, evaluated every N steps, OOM-tolerant."""

    def __init__(self, config: ProjectConfig, store: Store | None, request: TrainRequest,
                 data: TrainingData, device: torch.device, job_id: int | None = None,
                 ranks=None):
        self.config, self.store, self.request, self.data = config, store, request, data
        self.kind = kind_named(data.student.kind)  # how its figures are worded, read once
        self.device, self.job_id = device, job_id
        # Data-parallel ranks (kiwb.workers.train_ranks.TrainRanks), or None for one process.
        # Only rank 0 records, evaluates and checkpoints; every rank steps the same batches.
        self.ranks = ranks
        self.leads = ranks is None or ranks.leads
        self.training = config.training
        self.run_dir = ProjectPaths(config.root).run_dir(request.run)
        n = len(data.texts)
        self.steps_per_epoch = math.ceil(n / self.training.batch_size)
        # The kind may need more steps than [training] min_steps (a sigmoid head's rare labels)
        self.min_steps, self.min_steps_reason = data.student.min_steps(
            data, self.training.batch_size, self.training.min_steps)
        self.total_steps = total_steps(n, self.training.batch_size, self.training.epochs,
                                       self.min_steps)
        # Evaluations and pool checks keep the batch size that fitted from one to the next.
        self.eval_batch = FittedBatch(self.training.batch_size)
        # The experiment trackers [training] report_to names: rank 0's, fed what it records
        self.trackers = Trackers(
            self.training.report_to if store is not None and self.leads else (), request.run,
            self.run_dir, {"project": config.name, "run": request.run,
                           "kind": data.student.kind, "training": self.training.manifest(),
                           "method": request.settings.to_dict(),
                           "teachers": [t["name"] for t in data.manifest.get("teachers") or ()]})

    # -- set-up ------------------------------------------------------------------------
    def setup(self) -> None:
        ckpt.recover_run(self.run_dir)
        existing = ckpt.list_checkpoints(self.run_dir)
        if existing and not self.request.resume:
            raise KiwbError(f"run {self.request.run!r} already has checkpoints; continue it with "
                            "--resume or start another with --run NEW_NAME")
        if self.request.resume and not existing:
            # A job that failed before its first checkpoint is told to resume like any other.
            console.print(f"Run {self.request.run} has no checkpoint yet; starting it from step 0",
                          highlight=False, markup=False)
        torch.manual_seed(self.training.seed)
        if existing:
            ckpt.check_resumable(self.run_dir, self.data.manifest)
            self._load(self._intact(existing))
        else:
            self.model, self.tokenizer = self.initial_model()
            self.step, self.best, self.fit_reached = 0, None, None
        self.learning_rate, chosen = resolve_learning_rate(self.training.learning_rate, self.model.config)
        if not existing:  # the rate "auto" chose, and the teachers' MC dropout, for the model card
            dropout = recorded_dropout(self.store, self.data.manifest) if self.store else {}
            evaluation = self.config.data.eval  # named as trained on, for the card's model-index
            ckpt.write_manifest(self.run_dir, {**self.data.manifest, "learning_rate": self.learning_rate,
                                               **({"teacher_dropout": dropout} if dropout else {}),
                                               **({"eval_source": evaluation.source()}
                                                  if evaluation is not None else {})})
        self.model.to(self.device)
        of_epochs = total_steps(len(self.data.texts), self.training.batch_size, self.training.epochs, 0)
        raised = ("" if self.total_steps <= of_epochs else
                  f" (raised from {of_epochs:,}: {self.min_steps_reason})"
                  if self.min_steps_reason and self.total_steps > self.training.min_steps else
                  f" (raised from {of_epochs:,} to min_steps; a small pool needs more passes)")
        console.print(f"Learning rate {self.learning_rate:.1e} ({chosen}); {self.total_steps:,} steps "
                      f"= {self.total_steps / self.steps_per_epoch:.1f} epochs of "
                      f"{len(self.data.texts):,} texts{raised}", highlight=False, markup=False,
                      soft_wrap=True)
        self.autocast_dtype = AUTOCAST_DTYPES[self._mixed_precision()]
        self.steps = OptimizerSteps(
            self.model, self.device, learning_rate=self.learning_rate,
            weight_decay=self.training.weight_decay, total_steps=self.total_steps,
            warmup_ratio=self.training.warmup_ratio, batch_size=self.training.batch_size,
            autocast_dtype=self.autocast_dtype)
        if existing:
            self.steps.load_state_dict(self._state)
            torch.set_rng_state(self._state["rng_cpu"])
            if self.device.type == "cuda":
                # Only the job's own GPU: what other GPUs are visible may change between runs.
                # Older checkpoints kept every GPU's state, as "rng_cuda".
                legacy = self._state.get("rng_cuda") or []
                index = self.device.index or 0
                state = self._state.get("rng_device", legacy[index] if index < len(legacy) else None)
                if state is not None:
                    torch.cuda.set_rng_state(state, self.device)
        self.features = self.data.student.features(self.tokenizer, self.data,
                                                   self.training.max_length)
        self.eval_features = (self.data.student.eval_features(self.tokenizer, self.data,
                                                              self.training.max_length)
                              if self.data.eval_texts else None)
        self.target_shares = target_shares(self.data).tolist()
        # A fixed sample of the pool: how well the student reproduces its targets there (its
        # fit), and without an eval set, whether it predicts the classes its targets hold.
        self.pool_sample_rows = torch.randperm(
            len(self.data.texts), generator=torch.Generator().manual_seed(self.training.seed)
        )[:POOL_SAMPLE_TEXTS]
        self.train_model = self.model
        if self.ranks is not None:  # the others build the same model, then take these weights
            self.ranks.send_plan(self, self._state if existing else None)
            self.train_model = self.ranks.wrap(self.model)

    def initial_model(self):
        """The student before its first step, and its tokenizer: the base with a new union
        head, or the merged model a run starts from (--init-from-merge)."""
        if self.data.init_from is not None:
            from transformers import AutoTokenizer

            start = self.data.manifest["init_from_merge"]
            console.print(f"Starting from the weights of merge run {start['run']} "
                          f"({start['method']}), not from the base", highlight=False,
                          markup=False)
            return (self.data.student.load_checkpoint(self.data.init_from),
                    AutoTokenizer.from_pretrained(self.data.init_from))
        return self.data.student.load_base(self.config.resolve(self.training.student),
                                           self.data.labels)

    def _mixed_precision(self) -> str:
        setting = self.training.mixed_precision
        precision, note = training_precision_for(setting, self.device)
        if self.ranks is not None:  # rank 0 decides for every rank, from what each GPU has
            precision, ranks_note = agreed_training_precision(setting, precision, self.ranks.met)
            note = ranks_note or note
        if note is not None:  # once, at set-up: why the run does not train as asked
            console.print(note, highlight=False, markup=False, soft_wrap=True)
        return precision

    def _intact(self, existing: list):
        """The newest checkpoint that is what was written; a damaged newer one is said and
        passed over (the run goes on from the one before it)."""
        for checkpoint in reversed(existing):
            problem = ckpt.checkpoint_problem(checkpoint)
            if problem is None:
                return checkpoint
            kept = ckpt.set_aside(checkpoint)  # out of the way of the one that will replace it
            console.print(f"{checkpoint}: damaged ({problem}); moved to {kept.name}, resuming "
                          "from the checkpoint before it", style="yellow", highlight=False,
                          markup=False, soft_wrap=True)
        raise KiwbError(f"run {self.request.run!r}: every checkpoint is damaged; start the run "
                        "afresh with --run NEW_NAME")

    def _load(self, checkpoint) -> None:
        from transformers import AutoTokenizer

        self._state, progress = ckpt.load_state(checkpoint)
        self.model = self.data.student.load_checkpoint(checkpoint)
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        self.step = progress["step"]
        self.best = BestCheckpoint.from_dict(progress["best"]) if progress.get("best") else None
        self.fit_reached = progress.get("fit_reached")

    # -- the loop ----------------------------------------------------------------------
    def batch_rows(self, step: int) -> torch.Tensor:
        """Rows of `step`: each epoch is a permutation seeded by (seed, epoch), so a resumed
        run sees exactly the batches an uninterrupted one would."""
        epoch, index = divmod(step, self.steps_per_epoch)
        generator = torch.Generator().manual_seed(self.training.seed * 100_003 + epoch)
        order = torch.randperm(len(self.data.texts), generator=generator)
        size = self.training.batch_size
        return order[index * size:(index + 1) * size]

    def run(self, progress: Callable[[int, float], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> dict:
        try:
            return self._run(progress, should_stop)
        except BaseException:  # its trackers' runs end as failed (a finished or stopped run's
            self.trackers.close("failed")  # ended with its last event)
            raise

    def _run(self, progress, should_stop) -> dict:
        self.model.train()
        started, recent, pending = time.perf_counter(), [], []
        start_step, shown = self.step, None
        funnel = self.data.manifest.get("class_funnel")
        self._record(TrainStart(step=self.step, total_steps=self.total_steps,
                                method=self.request.settings.method,
                                learning_rate=self.learning_rate, precision=self.autocast_dtype,
                                funnel=ClassFunnel.from_dict(funnel) if funnel else None,
                                routing=routed_by(self.data.manifest)))
        while self.step < self.total_steps:
            stop = bool(should_stop is not None and should_stop())
            if self.ranks is not None:  # rank 0's decision, so every rank stops at this step
                stop = self.ranks.agree(stop)
            if stop:
                read_losses(pending, self.autocast_dtype)  # a NaN step must not be checkpointed
                self.checkpoint()
                self._record(TrainStopped(step=self.step))
                return {"stopped": True, "step": self.step, "best": self._best_dict()}
            pending.append((self.step + 1, self._step(self.batch_rows(self.step))))
            self.step += 1
            log_now = self.step % LOG_EVERY == 0 or self.step == self.total_steps
            evaluate_now = self.step % self.training.eval_every == 0 or self.step == self.total_steps
            # Losses stay on the device until a log line, a checkpoint or the first step needs
            # them: one host sync per LOG_EVERY steps, not per step.
            if log_now or evaluate_now or self.step == start_step + 1:
                recent += read_losses(pending, self.autocast_dtype)
                shown = recent[-1]
            if progress is not None:
                progress(1, shown)
            if log_now:
                rate = (self.step - start_step) * self.training.batch_size / (time.perf_counter() - started)
                self._record(TrainStep(step=self.step, loss=sum(recent) / len(recent),
                                       lr=self.steps.learning_rate, texts_per_s=rate,
                                       total_steps=self.total_steps))
                recent = []
            if evaluate_now:
                self.evaluate_and_checkpoint()
        self.settle_best_check()
        self._record(TrainDone(step=self.step, best=self.best))
        return {"stopped": False, "step": self.step, "best": self._best_dict(),
                "learning_rate": self.learning_rate}

    def _best_dict(self) -> dict | None:
        return self.best.to_dict() if self.best is not None else None

    def _step(self, rows: torch.Tensor) -> torch.Tensor:
        """One optimizer step over the batch `rows`; its mean loss, on the device. On several
        ranks each takes its share of the batch, its loss scaled so that the gradients the
        ranks average are those of the whole batch, and the loss returned is the batch's."""
        units = self._loss_units
        if self.ranks is None:
            return self.steps.step(rows, self._loss, units=units)
        mine, factor = self.ranks.share(rows, units)
        loss = self.steps.step(mine, lambda piece: self._loss(piece) * factor,
                               reduce=lambda: self.ranks.average_gradients(self.model),
                               units=units)
        return self.ranks.mean(loss)

    def _loss_units(self, rows: torch.Tensor) -> int:
        """How many terms the rows' mean loss averages (texts, or a tagger's words)."""
        return self.data.student.loss_units(self.features, rows)

    def _loss(self, rows: torch.Tensor) -> torch.Tensor:
        """The student's mean loss on some of the texts, against their integrated targets."""
        data, method = self.data, self.request.settings.method
        logits = data.student.logits(self.train_model, self.tokenizer, self.features, rows,
                                     self.device)
        if method == SUPERVISED:
            gold = data.student.row_gold(data, rows, self.features).to(self.device)
            return data.student.supervised_loss(logits, gold)
        targets, weights = (values.to(self.device)
                            for values in data.student.row_targets(data, rows, self.features))
        return data.student.distillation_loss(method, logits, targets, weights, data.coverage)

    # -- evaluation and checkpoints ------------------------------------------------------
    def evaluate_and_checkpoint(self) -> None:
        if not self.leads:  # rank 0 evaluates; the others only give their RNG for its checkpoint
            self.ranks.gather_rng()
            return
        metrics = None
        fit = self.fit_on_pool()
        if fit["fit"] is not None:
            self.fit_reached = max(fit["fit"], self.fit_reached or 0.0)
        if self.eval_features is not None:
            metrics = self.data.student.evaluate(self.model, self.tokenizer, self.eval_features,
                                                 self.data, self.eval_batch, self.device,
                                                 self.autocast_dtype)
            metrics["routing_accuracy"] = self.data.eval_routing
            metrics["metric"] = self.kind.words.headline
            check = self.data.student.eval_check(self.data, metrics, self.target_shares)
        else:
            check = self.check_on_pool()
        check = self.explained(check, fit["fit"])
        shown = check if judged(self.step, self.total_steps) else check.too_early()
        if metrics is not None:
            metrics.update(check=shown.to_dict(), **fit)
            self._record(TrainEval.from_dict({"step": self.step, **metrics}))
        else:
            self._record(TrainCheck(step=self.step, check=shown, **fit))
        self._log_evaluation(metrics, shown)
        if self.best is None or self.best.beaten_by(metrics):
            # its check judged whenever it was taken: it may be the one the run keeps
            found = metrics or {}
            self.best = BestCheckpoint(
                step=self.step, accuracy=found.get("accuracy"), metric=found.get("metric"),
                macro_f1=found.get("macro_f1"), details=found.get("details"), check=check,
                fit=fit["fit"])
        # The checkpoint records the best so far (kiwb.project.run_folder reads it there), so
        # the best is named before anything is pruned.
        self.checkpoint(evaluation=metrics)
        ckpt.prune_checkpoints(self.run_dir, keep={ckpt.step_name(self.best.step)})

    def explained(self, check: LearningCheck, fit: float | None) -> LearningCheck:
        """The check with its cause (the class funnel's where the eval texts give one, else
        the fit to the targets) and the advice that fits the run's method."""
        method = self.request.settings.method
        check = with_fit(check, fit, FIT_FLOOR, (self.data.eval_routing or {}).get("accuracy"),
                         self.fit_reached, supervised=method == SUPERVISED)
        if method != SUPERVISED:
            check = with_funnel(check, self.funnel_losses)
        return for_method(check, method)

    @functools.cached_property
    def funnel_losses(self) -> dict[str, str | None]:
        """Where the integration's class funnel loses each class on the eval texts (read once:
        the funnel is the run's, the same at every evaluation); empty without one."""
        funnel = self.data.manifest.get("class_funnel")
        return ClassFunnel.from_dict(funnel).lost_at() if funnel else {}

    def _log_evaluation(self, metrics: dict | None, check: LearningCheck) -> None:
        """One log line per evaluation; a flagged check says what is wrong on the same line."""
        where = f"Step {self.step:,}/{self.total_steps:,}"
        if metrics is not None:
            reference = self.data.eval_reference or {}
            named = reference.get("name", "the Ensemble").removeprefix("the ")
            figures = (self.kind.words.evaluation_text(metrics)
                       + (f" ({named} {100 * reference['accuracy']:.1f}%)"
                          if reference.get("accuracy") is not None else ""))
        else:
            figures = "pool predictions checked against the targets"
        if check.fit is not None:
            figures += f"; fits its targets {100 * check.fit:.1f}%"
        verdict = (f" · {check.status}: {check.problem}{check.cause_text()}" if check.flagged
                   else "")
        console.print(f"{where}: {figures}{verdict}", highlight=False, markup=False, soft_wrap=True)

    def settle_best_check(self) -> None:
        """The kept checkpoint's verdict once the run is over: a student taught wrong targets
        keeps an early checkpoint, from before it fitted them, so whether it could fit them is
        read from the whole run's best fit."""
        if not self.leads or self.best is None or self.best.check is None:
            return
        settled = self.explained(self.best.check, self.best.check.fit)
        if settled != self.best.check:
            self.best = dataclasses.replace(self.best, check=settled)
            ckpt.settle_check(self.run_dir, self.best.step, settled.to_dict())

    def fit_on_pool(self) -> dict:
        """How well the student reproduces its training targets on the pool sample, in its
        kind's terms: {"fit": figure} (and a multi-task student's "fit_per_task")."""
        return self.data.student.fit(self.model, self.tokenizer, self.features, self.data,
                                     self.pool_sample_rows, self.eval_batch, self.device,
                                     self.autocast_dtype)

    def check_on_pool(self) -> LearningCheck:
        """The student's predicted class shares on the pool sample against its targets'."""
        features = [self.features[int(row)] for row in self.pool_sample_rows]
        counts = self.data.student.predicted_counts(
            self.model, self.tokenizer, features, self.eval_batch, self.device,
            self.autocast_dtype, len(self.target_shares))
        return self.data.student.pool_check(self.data, counts, self.target_shares)

    def checkpoint(self, evaluation: dict | None = None) -> None:
        if not self.leads:
            self.ranks.gather_rng()
            return
        state = {**self.steps.state_dict(), "rng_cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["rng_device"] = torch.cuda.get_rng_state(self.device)
        if self.ranks is not None:  # each rank's dropout draws, so a resume goes on exactly
            state["rng_ranks"] = self.ranks.gather_rng()
        ckpt.save_checkpoint(self.run_dir, self.step, self.model, self.tokenizer, state,
                             {"step": self.step, "best": self._best_dict(),
                              "fit_reached": self.fit_reached,
                              "total_steps": self.total_steps, "evaluation": evaluation})

    def _record(self, event: TrainEvent) -> None:
        if self.store is not None:  # rank 0's alone
            self.store.append_event(event.kind, event.to_dict(), job_id=self.job_id,
                                    run=self.request.run)
            self.trackers.record(event)


def target_shares(data: TrainingData) -> torch.Tensor:
    """What the learning check compares the student's predictions with, per class: the
    share of taught rows whose target is that class (the student's kind says how)."""
    return data.student.target_shares(data)


def with_training_overrides(config: ProjectConfig, **overrides) -> ProjectConfig:
    values = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(config, training=dataclasses.replace(config.training, **values)) if values else config
