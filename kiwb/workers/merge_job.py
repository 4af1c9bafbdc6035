"""`kiwb merge` as a job: merge the teachers' weights, choose lambda (and TIES's k) on the
labeled eval set where they are not given, and record the merged model as a run like a
trained one (a checkpoint at step 0, its evaluation, train.* events), so `kiwb evaluate`,
`kiwb export`, `kiwb predict`, the Accuracy pane and `kiwb train --init-from-merge` read it.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from kiwb.console import console
from kiwb.core.choices import (
    DEFAULT_MERGE_SCALE,
    DEFAULT_TIES_TOP_K,
    MERGE_SCALE_GRID,
    TIES_TOP_K_GRID,
)
from kiwb.errors import KiwbError
from kiwb.kinds import TeacherKind, kind_named
from kiwb.project.atomic import atomic_directory, recover_interrupted_writes
from kiwb.project.head_clash import head_clash_lines
from kiwb.project.job_specs import MergeSpec
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import BestCheckpoint, TrainDone, TrainEval, TrainStart
from kiwb.project.run_manifest import RunManifest
from kiwb.shell import command
from kiwb.workers import checkpoints as ckpt
from kiwb.workers.job import JobSession, Outcome
from kiwb.workers.kind_runtimes import runtime_of


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One setting of the rule: lambda and k where the method has them."""

    scale: float | None = None
    top_k: float | None = None

    def text(self) -> str:
        parts = ([f"lambda {self.scale:g}"] if self.scale is not None else []) + (
            [f"k {self.top_k:g}%"] if self.top_k is not None else [])
        return ", ".join(parts) or "plain average"


def candidates(spec: MergeSpec, labeled: bool) -> tuple[list[Candidate], str]:
    """The settings to try, the default first (it wins ties), and how the one kept is chosen:
    "given" (every value on the command line), "eval" (the rest tried on the labeled eval
    set), or "default" (no labeled eval set to choose on)."""
    if spec.method == "average":
        return [Candidate()], "given"
    default_scale = DEFAULT_MERGE_SCALE[spec.method]
    ties = spec.method == "ties"
    given = spec.scale is not None and (not ties or spec.top_k is not None)
    if given or not labeled:
        return [Candidate(spec.scale if spec.scale is not None else default_scale,
                          (spec.top_k if spec.top_k is not None else DEFAULT_TIES_TOP_K)
                          if ties else None)], ("given" if given else "default")
    scales = [spec.scale] if spec.scale is not None else [default_scale] + [
        value for value in MERGE_SCALE_GRID[spec.method] if value != default_scale]
    top_ks = [None] if not ties else [spec.top_k] if spec.top_k is not None else [
        DEFAULT_TIES_TOP_K] + [value for value in TIES_TOP_K_GRID if value != DEFAULT_TIES_TOP_K]
    return [Candidate(scale, top_k) for top_k in top_ks for scale in scales], "eval"


def given_settings(spec: MergeSpec) -> list[str]:
    """The settings of the rule given on the command line (or the form): lambda, top_k."""
    return [name for name, value in (("lambda", spec.scale), ("top_k", spec.top_k))
            if value is not None]


def run_merge(session: JobSession) -> Outcome:
    from kiwb.workers.merge import load_merge_inputs, merged_backbone, merged_model
    from kiwb.workers.project_inputs import inspect_teachers, load_dataset_role
    from kiwb.workers.runtime import resolve_device

    spec: MergeSpec = session.job.spec
    project = session.project()
    config, kind = project.config, project.kind
    refusal = kind.jobs.merge_refusal
    if refusal:
        raise KiwbError(f"{config.file}: {refusal}")
    run = session.job.run
    paths = ProjectPaths(config.root)
    run_dir = paths.run_dir(run)
    recover_interrupted_writes(paths.runs, run)
    if run_dir.exists() and not spec.force:
        raise KiwbError(f"run {run!r} already exists; choose another --run or add --force to "
                        "replace it")
    device = resolve_device(spec.device or config.training.device)
    session.started(device)
    started = time.perf_counter()
    teachers = inspect_teachers(config)
    for line in head_clash_lines(config):  # what another merging tool would do to these heads
        console.print(f"Note: {line}", highlight=False, markup=False, soft_wrap=True)
    base = spec.base or (config.resolve(config.training.student) if config.training.student
                         else None)
    inputs = load_merge_inputs(teachers, kind, base, needs_base=spec.method != "average")
    evaluation = load_dataset_role(config, "eval", kind)
    labeled = evaluation is not None and _has_gold(evaluation)
    tried, chosen_on = candidates(spec, labeled)
    console.print(f"Merging {len(teachers)} teachers ({', '.join(t.name for t in teachers)}) by "
                  f"{spec.method} into {len(inputs.union)} outputs"
                  + (f" from the base {inputs.base_name}" if inputs.base is not None else "")
                  + (f"; trying {len(tried)} settings on {evaluation.source}"
                     if chosen_on == "eval" else ""), highlight=False, markup=False,
                  soft_wrap=True)
    if chosen_on == "default":
        defaulted = Candidate(*(None if name in given_settings(spec) else value for name, value
                                in (("lambda", tried[0].scale), ("top_k", tried[0].top_k))))
        console.print(f"No labeled eval set to choose on: using the default {defaulted.text()} "
                      "(set [data.eval] with gold labels, or pass --lambda/--top-k)",
                      highlight=False, markup=False, soft_wrap=True)
    results: list[tuple[Candidate, dict | None]] = []
    headline = kind.words.headline
    # named as a staging folder of the run, so a killed merge's is cleared by the next one
    with tempfile.TemporaryDirectory(prefix=f".{run}.", suffix=".tmp",
                                     dir=_scratch_parent(paths)) as scratch, \
            session.progress(f"merge {run}", total=len(tried), unit="settings") as advance:
        for candidate in tried:
            if session.should_stop():
                raise InterruptedError("cancelled before a setting was chosen; nothing was "
                                       "written")
            model = merged_model(inputs, merged_backbone(inputs, spec.method, candidate.scale,
                                                         candidate.top_k))
            metrics = None
            if labeled:
                folder = Path(scratch) / "candidate"
                model.save_pretrained(folder, safe_serialization=True)
                inputs.tokenizer.save_pretrained(folder)
                metrics = runtime_of(kind).evaluate(folder, evaluation, device,
                                                    config.training.batch_size,
                                                    config.training.max_length)
                console.print(f"  {candidate.text()}: eval {headline} "
                              f"{100 * metrics['accuracy']:.1f}%, macro-F1 "
                              f"{100 * metrics['macro_f1']:.1f}%", highlight=False, markup=False)
            results.append((candidate, metrics))
            advance(f"merge {run}", 1)
    # the default is tried first, so a setting that only ties it does not replace it
    best, metrics = max(results, key=lambda pair: pair[1]["accuracy"] if pair[1] else 0.0)
    if chosen_on == "eval":
        default = results[0]
        console.print(f"Chose {best.text()} on the eval set: {headline} "
                      f"{100 * metrics['accuracy']:.1f}% (the default {default[0].text()}: "
                      f"{100 * default[1]['accuracy']:.1f}%)", highlight=False, markup=False,
                      soft_wrap=True)
    model = merged_model(inputs, merged_backbone(inputs, spec.method, best.scale, best.top_k))
    record = merge_record(spec, inputs, best, chosen_on, results, time.perf_counter() - started)
    manifest = RunManifest(
        kind=kind.name,
        teachers=[{"name": info.name, "hash": _teacher_hash(info, session),
                   "labels": list(info.labels)} for info in teachers],
        labels=list(inputs.union), method={"method": f"merge-{spec.method}"},
        student=inputs.base_name, eval_data=evaluation.fingerprint if labeled else None,
        own={"merge": record}).to_dict()
    write_merge_run(run_dir, model, inputs.tokenizer, manifest, metrics)
    _record_events(session, run, spec.method, metrics, kind)
    console.print(f"Wrote run {run} ({best.text()})"
                  + (f": eval {headline} {100 * metrics['accuracy']:.2f}%" if metrics else "")
                  + f". Evaluate it: {command('evaluate', session.project_label, '--run', run)}; "
                  f"export it: {command('export', session.project_label, '--run', run)}; or start "
                  "a student from it: "
                  + command("train", session.project_label, "--init-from-merge", run),
                  highlight=False, markup=False, soft_wrap=True)
    return Outcome(data={"run": run, "merge": record,
                         "best": {"step": 0, "accuracy": metrics and metrics["accuracy"],
                                  "macro_f1": metrics and metrics["macro_f1"]}})


def merge_record(spec: MergeSpec, inputs, best: Candidate, chosen_on: str,
                 results: list, seconds: float) -> dict:
    """How the merged model was made, for its run's manifest, its model card and the job."""
    return {
        "method": spec.method, "lambda": best.scale, "top_k": best.top_k,
        # how the settings not given were chosen: "eval", "default", or "given" (none left)
        "chosen_on": chosen_on, "given": given_settings(spec), "base": inputs.base_name,
        "averaged_not_in_base": inputs.not_in_base,
        "similarities": {name: round(value, 4) for name, value in inputs.similarities.items()},
        "tried": [{"lambda": candidate.scale, "top_k": candidate.top_k,
                   "accuracy": metrics and metrics["accuracy"],
                   "macro_f1": metrics and metrics["macro_f1"]}
                  for candidate, metrics in results],
        "seconds": round(seconds, 1),
    }


def write_merge_run(run_dir: Path, model, tokenizer, manifest: dict, metrics: dict | None) -> None:
    """The run folder in one rename: its step-0 checkpoint (with its evaluation, the best)
    and manifest.json; a failure leaves no part of it."""
    if metrics is not None:  # what its headline figure holds, named as a trained run's
        metrics = {**metrics, "metric": kind_named(manifest.get("kind")).words.headline}
    best = {"step": 0, "accuracy": metrics and metrics["accuracy"],
            "metric": metrics and metrics["metric"],
            "macro_f1": metrics and metrics["macro_f1"], "check": None}
    with atomic_directory(run_dir) as staging:
        ckpt.save_checkpoint(staging, 0, model, tokenizer, {},
                             {"step": 0, "best": best, "total_steps": 0, "evaluation": metrics})
        ckpt.write_manifest(staging, manifest)


def _record_events(session: JobSession, run: str, method: str, metrics: dict | None,
                   kind: TeacherKind) -> None:
    """The run's train.* events, as a trained run's (no steps): its start, its evaluation,
    its end; a run replaced with --force starts over from the start event."""
    events = [TrainStart(step=0, total_steps=0, method=f"merge-{method}")]
    metric = kind.words.headline if metrics is not None else None
    if metrics is not None:
        events.append(TrainEval.from_dict({**eval_event_data(metrics), "metric": metric}))
    events.append(TrainDone(step=0, best=BestCheckpoint(
        step=0, accuracy=metrics["accuracy"] if metrics else None, metric=metric)))
    for event in events:
        session.store.append_event(event.kind, event.to_dict(), job_id=session.job.id, run=run)


def eval_event_data(metrics: dict) -> dict:
    """A train.eval event's fields from a kind runtime's evaluate figures; a kind's other figures
    (a multi-label model's Hamming loss, thresholds...) go into details, as its training
    run's do."""
    fields = {field.name for field in dataclasses.fields(TrainEval)}
    data = {"step": 0, "confusion": [], "routing_accuracy": None,
            **{key: value for key, value in metrics.items() if key in fields}}
    if others := {key: value for key, value in metrics.items()
                  if key not in fields and key != "kind"}:
        data["details"] = others
    return data


def _has_gold(table) -> bool:
    return any(getattr(table, name) is not None
               for name in ("labels", "label_sets", "tags", "task_gold"))


def _scratch_parent(paths: ProjectPaths) -> Path:
    paths.runs.mkdir(parents=True, exist_ok=True)
    return paths.runs


def _teacher_hash(info, session: JobSession) -> str:
    from kiwb.workers.teachers import teacher_content_hash

    return teacher_content_hash(info, session.store)
