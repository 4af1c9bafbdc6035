"""`kiwb export`: a trained student as a plain Hugging Face model folder with a model card."""

from __future__ import annotations

import json
from pathlib import Path

from kiwb import __version__
from kiwb.core.learning_check import check_of
from kiwb.core.routing_check import RoutingCheck
from kiwb.errors import KiwbError
from kiwb.kinds import kind_named
from kiwb.project.atomic import atomic_directory, recover_interrupted_writes
from kiwb.project.export_destination import check_writable
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import ClassFunnel
from kiwb.project.run_folder import MANIFEST_NAME, evaluation_of
from kiwb.project.run_manifest import routed_by
from kiwb.shell import command
from kiwb.workers import checkpoints as ckpt
from kiwb.workers.dropout_check import dropout_card_lines
from kiwb.workers.hub_card import card_metadata
from kiwb.workers.kind_runtimes import runtime_of
from kiwb.workers.runtime import load_classifier


def choose_checkpoint(project_root: Path, run: str, checkpoint: str = "best") -> Path:
    """The checkpoint folder of a run: `best`, `last`, or a step number / folder name; one
    that is not what was written is refused in one line (kiwb.workers.checkpoints)."""
    chosen = _named_checkpoint(project_root, run, checkpoint)
    ckpt.check_checkpoint(chosen)
    return chosen


def _named_checkpoint(project_root: Path, run: str, checkpoint: str) -> Path:
    run_dir = ProjectPaths(project_root).run_dir(run)
    available = ckpt.list_checkpoints(run_dir)
    if not available:
        runs = sorted(p.name for p in ProjectPaths(project_root).runs.glob("*") if p.is_dir())
        raise KiwbError(f"run {run!r} has no checkpoints (runs here: {', '.join(runs) or 'none'}); "
                        f"train it first with: {command('train', project_root, '--run', run)}")
    names = ", ".join(p.name for p in available)
    if checkpoint == "last":
        return available[-1]
    if checkpoint == "best":
        best = ckpt.read_best(run_dir)
        if not best:
            return available[-1]
        chosen = ckpt.checkpoints_dir(run_dir) / best["checkpoint"]
        if not chosen.is_dir():
            raise KiwbError(f"run {run!r}: its newest checkpoint names {best['checkpoint']} the "
                            f"best, which is gone (the run has: {names}); choose one with "
                            "--checkpoint STEP or --checkpoint last")
        return chosen
    name = ckpt.step_name(int(checkpoint)) if checkpoint.isdigit() else checkpoint
    chosen = ckpt.checkpoints_dir(run_dir) / name
    if not chosen.is_dir():
        raise KiwbError(f"run {run!r} has no checkpoint {checkpoint!r} (it has: {names}, best, last)")
    return chosen


def export_student(project_root: Path, run: str, destination: Path, *, checkpoint: str = "best",
                   force: bool = False) -> Path:
    """Write the chosen checkpoint with save_pretrained, its tokenizer, a model card and manifest."""
    from transformers import AutoTokenizer

    source = choose_checkpoint(project_root, run, checkpoint)
    check_writable(destination)  # before anything is recovered or staged there
    recover_interrupted_writes(destination.parent, destination.name)
    check_destination(destination, run, force)
    run_dir = ProjectPaths(project_root).run_dir(run)
    manifest = ckpt.read_manifest(run_dir) or {}
    progress = ckpt.read_progress(source)
    kind = kind_named(manifest.get("kind"))
    # a kind whose export is more than a classifier folder writes its own
    written = runtime_of(kind).export(project_root, run, destination, source, manifest, progress)
    if written is not None:
        return written
    model = load_classifier(source, kind=kind.name)
    tokenizer = AutoTokenizer.from_pretrained(source)
    export_manifest = {
        "kiwb_version": __version__, "run": run, "checkpoint": source.name, "step": progress["step"],
        "labels": [model.config.id2label[i] for i in range(model.config.num_labels)],
        "teachers": manifest.get("teachers"), "method": manifest.get("method"),
        "training": manifest.get("training"), "learning_rate": manifest.get("learning_rate"),
        "student_base": manifest.get("student"),
        "data": manifest.get("data"), "eval_data": manifest.get("eval_data"),
        # a merge run's own figures only: a run it replaced (--force) left step-0 events too
        "evaluation": (progress.get("evaluation") if manifest.get("merge")
                       else evaluation_of(project_root, run, progress)),
        "routing_check": manifest.get("routing_check"),
        "class_funnel": manifest.get("class_funnel"),
        **({"teacher_dropout": manifest["teacher_dropout"]} if manifest.get("teacher_dropout") else {}),
        # routing = "auto": the routing it chose, and the table it chose from
        **({"routing_choice": manifest["routing_choice"]} if manifest.get("routing_choice") else {}),
        # a representation routing: what it read, and where each teacher's reference came from
        **({"representations": manifest["representations"]}
           if manifest.get("representations") else {}),
        **({"merge": manifest["merge"]} if manifest.get("merge") else {}),
        **({"init_from_merge": manifest["init_from_merge"]}
           if manifest.get("init_from_merge") else {}),
        **({"thresholds": model.config.label_thresholds}
           if getattr(model.config, "label_thresholds", None) else {}),
        "kind": kind.name,
        # the labeled set the figures are on, as kiwb.toml names it (the card's model-index)
        "eval_source": manifest.get("eval_source"),
    }
    try:
        with atomic_directory(destination) as staging:
            model.save_pretrained(staging, safe_serialization=True)
            tokenizer.save_pretrained(staging)
            (staging / MANIFEST_NAME).write_text(json.dumps(export_manifest, indent=2),
                                                 encoding="utf-8")
            (staging / "README.md").write_text(model_card(export_manifest, project_root),
                                               encoding="utf-8")
    except OSError as error:  # a read-only file system, a full disk: nothing was put in place
        cause = error.strerror or str(error)
        raise KiwbError(f"{destination}: the export could not be written ({cause}); nothing "
                        "was replaced. Free space or choose another --to") from None
    return destination


def read_export_manifest(destination: Path) -> dict:
    """The kiwb manifest an export wrote beside the model."""
    return json.loads((destination / MANIFEST_NAME).read_text(encoding="utf-8"))


def check_destination(destination: Path, run: str, force: bool) -> None:
    """Refuse a destination that exists, unless --force and it is empty or an earlier export."""
    if not (destination.exists() or destination.is_symlink()):
        return
    if not force:
        raise KiwbError(f"{destination} already exists; choose another folder or add --force")
    if destination.is_dir() and ((destination / MANIFEST_NAME).is_file()
                                 or not any(destination.iterdir())):
        return
    # a folder of its own beside it: inside a file is no folder at all
    own = destination / run if destination.is_dir() else destination.with_name(
        f"{destination.name}-{run}")
    raise KiwbError(f"{destination} is neither an empty folder nor an earlier kiwb export (it has "
                    f"no {MANIFEST_NAME}), so --force will not replace it; export into a folder of "
                    f"its own, such as {own}")


def model_card(manifest: dict, root: Path | None = None) -> str:
    """A README.md for the exported model: labels, teachers, method, settings, figures
    (`root`: the project folder, where a relative student base is read)."""
    method = manifest.get("method") or {}
    kind = kind_named(manifest.get("kind"))
    what = kind.words.card
    lines = [
        "---", card_metadata(manifest, root=root).rstrip("\n"), "---", "",
        f"# {'Merged' if manifest.get('merge') else 'Student'} model from kiwb run "
        f"`{manifest['run']}`", "",
        *(_merge_summary(what, manifest["merge"]) if manifest.get("merge") else [
            f"{what['summary']} trained without labels by [kiwb](https://pypi.org/project/kiwb/) "
            "(MUKI knowledge integration: Monte-Carlo-dropout uncertainty decides which "
            f"teacher's prediction each {what['unit']} learns from).", ""]),
        f"## {what['labels']}", "", ", ".join(f"`{label}`" for label in manifest["labels"]), "",
        "## Teachers", "", "| teacher | labels | content hash |", "|---|---|---|",
    ]
    for teacher in manifest.get("teachers") or []:
        lines.append(f"| {teacher['name']} | {', '.join(teacher['labels'])} | `{teacher['hash'][:16]}` |")
    if manifest.get("merge"):
        lines += ["", "## How it was made", "", *_merge_lines(manifest["merge"])]
    else:
        lines += _method_lines(manifest, method)
    lines += ["", "## Evaluation", "", *_evaluation_lines(manifest)]
    lines += _funnel_lines(manifest)
    # a kind whose model no pipeline reads whole gives its own lines (multi-task: every slice)
    use = (what["use"].rstrip("\n").split("\n") if "use" in what else
           ["from transformers import pipeline", "", what["pipeline"], what["call"]])
    lines += ["", "## Use", "", "```python", *use, "```", ""]
    return "\n".join(lines)


def _merge_summary(what: dict, merge: dict) -> list[str]:
    summary = what["summary"].rstrip(",")
    return [f"{summary}, made without training by merging the teachers' weights with "
            f"[kiwb](https://pypi.org/project/kiwb/) (`kiwb merge`, {merge['method']}): each "
            "teacher's classifier rows sit in their labels' slots, a label several teachers "
            "have gets the mean of their rows.", ""]


def _merge_lines(merge: dict) -> list[str]:
    """The merge's rule and settings, how they were chosen, and its base."""
    chosen = {"eval": "chosen on the labeled eval set among "
                      f"{len(merge.get('tried') or [])} settings",
              "default": "kiwb's default (no labeled eval set to choose on)",
              "given": "as given"}[merge["chosen_on"]]
    given = merge.get("given") or []
    settings = "; ".join(f"{name} = {merge[key]:g}, {'as given' if key in given else chosen}"
                         for name, key in (("lambda", "lambda"), ("k", "top_k"))
                         if merge.get(key) is not None)
    lines = [f"- rule: `{merge['method']}`" + (f" ({settings})" if settings else ""),
             f"- base (the origin of the teachers' changes): `{merge.get('base')}`"
             if merge.get("base") else "- base: none (a plain average of the teachers)"]
    if merge.get("averaged_not_in_base"):
        lines.append(f"- tensors the base lacks, averaged: {len(merge['averaged_not_in_base'])}")
    return lines


def _merge_start(start: dict | None) -> str:
    """After the student base: the merge run it started from instead, if it did."""
    if not start:
        return ""
    return (f", started from the weights of merge run `{start['run']}` ({start['method']}) in "
            "place of the base with a new head")


def _routing_line(method: dict, choice: dict | None) -> str:
    """The routing the student's targets were made with; with `routing = "auto"`, the one it
    chose, on what, and the candidates' figures."""
    if not choice:
        return (f"- routing: `{method.get('routing', 'confidence')}`; MC dropout: "
                f"{method.get('use_mc')}; margin re-weighting: {method.get('reweight')}")
    line = (f"- routing: `{choice['chosen']}`, chosen by `auto`: {choice['why']}; margin "
            f"re-weighting: {method.get('reweight')}")
    if choice.get("table"):
        line += (" (each label-free routing's share of labeled texts routed to a teacher that "
                 "knows their label: " + ", ".join(
                     f"{name} {100 * value:.1f}%" for name, value
                     in sorted(choice["table"].items(), key=lambda item: -item[1])) + ")")
    return line


def _method_lines(manifest: dict, method: dict) -> list[str]:
    """The distillation's method and settings (a trained student's card)."""
    lines = ["", "## Method and settings", "",
             f"- method: `{method.get('method')}`"
              + (f" (tau = {method.get('tau')})" if method.get("method") == "muki-soft" else ""),
              _routing_line(method, manifest.get("routing_choice")),
              f"- student base: `{manifest.get('student_base')}`"
              + _merge_start(manifest.get("init_from_merge")),
              f"- checkpoint: `{manifest['checkpoint']}` (step {manifest['step']})"]
    for key, value in (manifest.get("training") or {}).items():
        chosen = manifest.get("learning_rate") if key == "learning_rate" and value == "auto" else None
        lines.append(f"- {key}: `{value}`" + (f" ({chosen:.2e})" if chosen is not None else ""))
    references = (manifest.get("representations") or {}).get("references") or {}
    if references:  # a representation routing's class means (or neighbours), per teacher
        lines.append("- routing reference (from each teacher's representation): "
                     + "; ".join(f"{teacher}: {text}" for teacher, text in references.items()))
    routing = RoutingCheck.from_dict(manifest.get("routing_check"))
    if routing is not None:  # a student trained on a collapsed routing lost a teacher's labels
        lines.append(f"- kiwb's routing check: {routing.status}"
                     + (f" ({routing.problem}; {routing.hint})" if routing.flagged else ""))
    # teachers whose MC passes were not their own dropout's (none acts, or a rate kiwb set)
    lines += dropout_card_lines(manifest.get("teacher_dropout") or {})
    thresholds = manifest.get("thresholds")
    if thresholds:  # a multi-label student decides each label at its own threshold
        lines.append("- decision thresholds (tuned per label on the labeled eval set, in "
                     "config.json as label_thresholds): "
                     + ", ".join(f"{label} {value:g}" for label, value in thresholds.items()))
    return lines


def student_recall(metrics: dict) -> dict | None:
    """The student's recall per class of an evaluation: per-class accuracy, or a token
    student's entity recall per type."""
    entity = metrics.get("entity") or {}
    return entity.get("per_type_recall") or metrics.get("per_class_accuracy")


def _funnel_lines(manifest: dict) -> list[str]:
    """Where each class went between the teachers and this student, as a markdown table."""
    if not manifest.get("class_funnel"):
        return []
    funnel = ClassFunnel.from_dict(manifest["class_funnel"])
    metrics = manifest.get("evaluation") or {}
    rows = funnel.rows(student_recall(metrics) if funnel.labeled is not None else None)
    columns = list(rows[0])
    where = (f"; recall on {funnel.labeled.where}, each step a share of the class's labeled texts"
             if funnel.labeled is not None else "")
    return ["", "## Where each class goes", "",
            f"From the teachers to this student over {funnel.num_texts:,} unlabeled texts: how "
            "many an owning teacher gives the class, how many of those the routing sent to it, "
            "the targets' share against the pool's as estimated" + where + ".", "",
            "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(row.values()) + " |" for row in rows)]


def _evaluation_lines(manifest: dict) -> list[str]:
    """The model card's figures for the exported checkpoint, or why there are none."""
    metrics = manifest.get("evaluation")
    if not metrics:
        if manifest.get("eval_data"):
            return [f"Checkpoint `{manifest['checkpoint']}` was saved between evaluations, so it "
                    "has no figures of its own; export an evaluated step (or `best`) for them."]
        return ["No labeled evaluation set was configured for this run."]
    lines = [f"On the labeled evaluation set at step {manifest['step']} "
             f"({metrics.get('num_texts')} texts):", "",
             f"- {kind_named(manifest.get('kind')).words.headline}: "
             f"{100 * metrics['accuracy']:.2f}%",
             f"- macro-F1: {100 * metrics['macro_f1']:.2f}%"]
    routing = dict(metrics.get("routing_accuracy") or {})
    routing.pop("routing", None)  # named by figures kiwb recorded before version 9 too
    chosen_name = routed_by(manifest)  # the routing the run trained with, by name
    for router, value in routing.items():
        name = f"{chosen_name} routing" if router == "chosen" else router.replace("_", " ")
        lines.append(f"- teacher-routing accuracy ({name}): {100 * value:.2f}%")
    check = check_of(metrics)
    fit = metrics.get("fit", check.fit if check is not None else None)
    if fit is not None:  # how far the student learnt what it was taught, beside how it does
        lines.append(f"- fit to its training targets (pool texts it trained on): {100 * fit:.2f}%")
    if check is not None:  # a user about to ship this model should see a collapse here too
        lines.append(f"- kiwb's learning check: {check.status}"
                     + (f" ({check.problem}{check.cause_text()})" if check.flagged else ""))
    name, figure = kind_named(manifest.get("kind")).words.per_class_columns
    lines += ["", f"| {name} | {figure} |", "|---|---|"]
    for label, value in metrics["per_class_accuracy"].items():
        lines.append(f"| {label} | {'–' if value is None else f'{100 * value:.1f}%'} |")
    return lines
