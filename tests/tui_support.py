"""Workbench test support: a small project written with the store's own API (no models) and
the typed records the real jobs write, and helpers to wait for the UI and read what it shows."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
from cli_helpers import Deadline
from rich.console import Console
from textual.widgets import Input

from kiwb.project.config import DatasetConfig, TeacherConfig, write_new_project
from kiwb.project.instances import replace_instances
from kiwb.project.job_specs import SCORE_RUN
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import (
    BestCheckpoint,
    ClassFunnel,
    EvalSummary,
    IntegrationSettings,
    IntegrationSummary,
    LabeledFunnel,
    RoutingAccuracy,
    RoutingDetails,
    ScoreShard,
    TeacherRouting,
    TrainDone,
    TrainEval,
    TrainStart,
    TrainStep,
    teacher_facts,
)
from kiwb.project.store import Store
from kiwb.tui.screens.forms import FormScreen

LABELS_A = ("sports", "politics")
LABELS_B = ("music", "cooking")
UNION = [*LABELS_A, *LABELS_B]
TEXTS = [
    "the striker scored a late goal to win the derby",
    "parliament passed the budget after a long debate",
    "the band opened its tour with a new album",
    "bake the bread in a hot oven with garlic",
    "the coach praised the team after the match",
    "a new song topped the charts this week",
    "the senate vote on the law was delayed",
    "the chef added spice to the sauce",
    "the minister sang at the stadium concert",
    "a referee cooked dinner for the league party",
]
INTEGRATION_KEY = "synthetic-integration"
RUN = "muki-hard"


def write_teacher(folder: Path, labels, *, architecture="BertForSequenceClassification",
                  model_type="bert", tokenizer="BertTokenizerFast", weights_bytes=2048) -> Path:
    """A checkpoint folder as save_pretrained lays it out, with placeholder weights."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": [architecture], "model_type": model_type,
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)}}))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": tokenizer, "pad_token": "[PAD]"}))
    (folder / "model.safetensors").write_bytes(b"\0" * weights_bytes)
    return folder


def write_data(root: Path) -> None:
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    gold = ["sports", "politics", "music", "cooking", "sports", "music", "politics", "cooking",
            "music", "cooking"]
    (data / "unlabeled.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    (data / "eval.jsonl").write_text("".join(
        json.dumps({"text": t, "label": g}) + "\n" for t, g in zip(TEXTS, gold, strict=True)))


def write_config(root: Path) -> Path:
    write_teacher(root / "teachers" / "a", LABELS_A)
    write_teacher(root / "teachers" / "b", LABELS_B, architecture="RobertaForSequenceClassification",
                  model_type="roberta", tokenizer="RobertaTokenizerFast", weights_bytes=4096)
    write_data(root)
    write_new_project(
        root, name="demo",
        teachers=[TeacherConfig("a", "teachers/a"), TeacherConfig("b", "teachers/b")],
        unlabeled=DatasetConfig("data/unlabeled.jsonl"),
        eval=DatasetConfig("data/eval.jsonl", label_column="label"))
    ProjectPaths(root).make_layout()
    return root


def _histogram(values) -> list[int]:
    return np.histogram(np.asarray(values), bins=20, range=(0.0, 1.0))[0].tolist()


def scores(teacher_index: int, count: int, seed: int) -> dict[str, np.ndarray]:
    """Score arrays of one teacher, as a real shard file holds them (arithmetic, no RNG, so
    snapshots do not depend on a random number stream)."""
    rows = np.arange(count)
    top = np.clip(0.5 + 0.5 * ((rows * 41 + seed * 29) % 97) / 96, 0.02, 0.98)
    det = np.stack([top, 1 - top], axis=1)
    det = np.where((rows % 2 == 1)[:, None], det[:, ::-1], det).astype(np.float32)
    mc = (0.8 * det + 0.1).astype(np.float32)

    def confidence(probs):
        entropy = -(probs * np.log(np.clip(probs, 1e-12, 1))).sum(-1)
        return (1 - entropy / np.log(probs.shape[1])).astype(np.float32)

    return {"det_probs": det, "mc_probs": mc, "det_confidence": confidence(det),
            "mc_confidence": confidence(mc),
            "mutual_information": ((rows % 5) / 25).astype(np.float32),
            "rows": rows.astype(np.int64)}


def write_scores(root: Path, store: Store) -> list[dict[str, np.ndarray]]:
    paths = ProjectPaths(root)
    arrays = []
    for index, (teacher, labels) in enumerate((("a", LABELS_A), ("b", LABELS_B))):
        key = SCORE_KEYS[teacher]
        store.register_score_set(key, teacher=teacher, dataset="unlabeled", num_texts=len(TEXTS),
                                 num_shards=1, meta={"labels": list(labels), "shard_size": 16})
        store.claim_shard(key, 0, "test")
        data = scores(index, len(TEXTS), seed=index + 1)
        buffer = io.BytesIO()
        np.savez(buffer, **data)
        paths.score_dir(key).mkdir(parents=True, exist_ok=True)
        paths.shard_file(key, 0).write_bytes(buffer.getvalue())
        store.finish_shard(key, 0, rows=len(TEXTS), seconds=1.0)
        shard = ScoreShard(teacher=teacher, dataset="unlabeled", key=key, shard=0, rows=len(TEXTS),
                           seconds=1.0, mc_confidence_hist=_histogram(data["mc_confidence"]),
                           det_confidence_hist=_histogram(data["det_confidence"]))
        store.append_event(shard.kind, shard.to_dict())
        arrays.append(data)
    return arrays


ROUTING = "mixture"
SCORE_KEYS = {"a": "score-a", "b": "score-b"}  # the score sets write_scores records


# What the routing estimated of each teacher: a sharp (its texts high, the others low), b vaguer
TEACHER_ROUTING = {
    "a": TeacherRouting(share=0.5, split=0.62, histogram_here=[0] * 13 + [1, 1, 0, 1, 1, 0, 1],
                        histogram_elsewhere=[1, 2, 1, 1] + [0] * 16),
    "b": TeacherRouting(share=0.45, split=0.41,
                        histogram_here=[0] * 7 + [1, 0, 1, 1, 0, 1, 0, 1] + [0] * 5,
                        histogram_elsewhere=[0] * 3 + [1, 1, 0, 1, 1, 0, 1] + [0] * 10),
}


def routed(summary: IntegrationSummary, name: str = ROUTING, *, score: str | None = None,
           **extra: dict) -> IntegrationSummary:
    """`summary` routed by `name`, with TEACHER_ROUTING as each teacher's routing estimates;
    `extra` replaces entries per teacher (calibration, with a labeled set)."""
    teachers = dict(TEACHER_ROUTING)
    for teacher, entries in extra.items():
        teachers[teacher] = dataclasses.replace(teachers[teacher], **entries)
    return dataclasses.replace(
        summary, routing=RoutingDetails(name=name, labeled_texts=0, score=score),
        per_teacher=[dataclasses.replace(facts, routing=teachers.get(facts.name))
                     for facts in summary.per_teacher])


def integration_summary(margins) -> IntegrationSummary:
    """An integration summary of these margins, built from the type the integration writes."""
    return IntegrationSummary(
        num_texts=len(margins), labels=UNION, overlapping_labels=[],
        per_teacher=teacher_facts(["a", "b"], [SCORE_KEYS["a"], SCORE_KEYS["b"]], [5, 5],
                                  labels=[LABELS_A, LABELS_B], routing=TEACHER_ROUTING),
        margin_quantiles={"0.0": 0.01, "0.5": float(np.median(margins)), "1.0": 0.9},
        margin_histogram=_histogram(margins), conflict_threshold=0.3,
        conflicts=int((np.asarray(margins) < 0.3).sum()),
        routing=RoutingDetails(name=ROUTING, labeled_texts=0), teachers_kind="sequence",
        routing_accuracy=RoutingAccuracy(mc_dropout=0.9, plain_confidence=0.7, chosen=0.95),
        eval=EvalSummary(
            num_texts=10,
            routing_accuracy=RoutingAccuracy(mc_dropout=0.9, plain_confidence=0.6, chosen=0.8),
            ensemble_accuracy=0.55, teacher_accuracy={"a": 0.4, "b": 0.5},
            confidence_histograms={
                "mc_dropout": {"right_teacher": [0] * 12 + [1, 2, 3, 4, 3, 2, 1, 1],
                               "wrong_teacher": [3, 5, 4, 2, 1] + [0] * 15},
                "plain_confidence": {"right_teacher": [0] * 14 + [1, 2, 3, 4, 4, 2],
                                  "wrong_teacher": [0] * 10 + [1, 2, 3, 3, 2, 1, 0, 0, 0, 0]}}),
    )


SETTINGS = IntegrationSettings(method="muki-hard", conflict_threshold=0.3)


def record_integration(store: Store, key: str, summary: IntegrationSummary,
                       settings: IntegrationSettings = SETTINGS) -> None:
    """Record an integration as `kiwb integrate` does: the typed settings and summary."""
    store.record_integration(key, dataset="unlabeled", settings=settings.to_dict(),
                             summary=summary.to_dict())


def write_integration(store: Store, arrays) -> None:
    mc = np.stack([a["mc_confidence"] for a in arrays], axis=1)
    ordered = np.sort(mc, axis=1)
    margins = (ordered[:, -1] - ordered[:, -2]).tolist()
    routed = mc.argmax(1).tolist()
    gold = [0, 1, 2, 3, 0, 2, 1, 3, 2, 3]
    rows = [(row, margins[row], routed[row], 2 * routed[row] + int(arrays[routed[row]]["det_probs"][row].argmax()),
             gold[row], mc[row].tolist(), TEXTS[row]) for row in range(len(TEXTS))]
    record_integration(store, INTEGRATION_KEY, integration_summary(margins))
    replace_instances(store.connection, INTEGRATION_KEY, rows)


DEFAULT_CONFUSION = [[2, 0, 0, 0], [1, 1, 0, 0], [0, 0, 2, 1], [0, 0, 0, 0]]


def write_run(root: Path, store: Store, run: str = RUN, method: str = "muki-hard",
              accuracies=(0.5, 0.75), routing: str | None = ROUTING,
              confusion=DEFAULT_CONFUSION, funnel=None, fit: float | None = 0.96) -> None:
    """Training events of a finished run, and its folder with checkpoints as a worker leaves it
    (`routing` and `fit` None: as older versions of kiwb recorded it, without the chosen routing
    or the student's fit to its targets). The learning check comes from kiwb's own check of
    `confusion`."""
    from kiwb.core.learning_check import check_on_eval, with_fit
    from kiwb.core.target_fit import FIT_FLOOR

    def event(record) -> None:
        store.append_event(record.kind, record.to_dict(), run=run)

    check = with_fit(check_on_eval(UNION, confusion), fit, FIT_FLOOR)
    routing_accuracy = RoutingAccuracy(mc_dropout=0.9, plain_confidence=0.6)
    if routing is not None:
        routing_accuracy = dataclasses.replace(routing_accuracy, chosen=0.85)
    total = 20
    event(TrainStart(step=0, total_steps=total, method=method, funnel=funnel, routing=routing))
    for step in range(2, total + 1, 2):
        event(TrainStep(step=step, loss=1.5 / step, lr=1e-4, texts_per_s=100.0, total_steps=total))
        if step % 10 == 0:
            accuracy = accuracies[step // 10 - 1]
            event(TrainEval(
                step=step, accuracy=accuracy, metric="accuracy", macro_f1=accuracy - 0.05,
                per_class_accuracy={"sports": 1.0, "politics": 0.5, "music": accuracy,
                                    "cooking": None},
                confusion=confusion, num_texts=10, routing_accuracy=routing_accuracy,
                check=check, fit=fit))
    event(TrainDone(step=total, best=BestCheckpoint(step=20, accuracy=accuracies[-1], check=check,
                                                    fit=fit)))
    run_dir = ProjectPaths(root).run_dir(run)
    write_checkpoints(run_dir, (10, 20), {"accuracy": accuracies[-1]})
    (run_dir / "manifest.json").write_text(json.dumps(
        {"labels": UNION, "method": {"method": method}}))


def write_checkpoints(run_dir: Path, steps, metrics: dict) -> None:
    """Checkpoint folders as training leaves them, without weights: each one's progress.json
    names the newest the best so far, with `metrics` its evaluation."""
    best = {"step": steps[-1], "accuracy": metrics["accuracy"]}
    for step in steps:
        folder = run_dir / "checkpoints" / f"step-{step:07d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "progress.json").write_text(json.dumps(
            {"step": step, "best": {**best, "step": step}, "evaluation": metrics}))


JOB_CLOCK = 1_700_000_000.0   # a fixed start for the jobs whose durations are shown


def write_jobs(store: Store) -> int:
    """Jobs as other processes leave them: a scoring job that took 3m 07s, a training job
    that failed before it began, and a scoring job running now; returns the running one's id
    (beat it again to keep it running)."""
    finished = store.jobs.create("score", SCORE_RUN, {})
    store.jobs.started(finished, {"device": "cpu"})
    store.jobs.record_progress(finished, {"done": 20, "total": 20, "unit": "texts", "rate": 0.1,
                                          "eta_s": 0.0, "label": "b"})
    store.jobs.end(finished, "finished", {"texts": 20})
    # Fixed times, so the "took" column is the same in every run.
    store.connection.execute("UPDATE jobs SET created_at=?, started_at=?, ended_at=? WHERE id=?",
                             (JOB_CLOCK, JOB_CLOCK, JOB_CLOCK + 187, finished))
    failed = store.jobs.create("train", RUN, {"run": RUN})
    store.jobs.end(failed, "failed", {
        "error": "no complete teacher scores yet; run: kiwb score",
        "log_tail": ["kiwb: error: no complete teacher scores yet; run: kiwb score"]})
    running = store.jobs.create("score", SCORE_RUN, {"batch_size": 8})
    store.jobs.started(running, {"device": "cpu"})
    store.jobs.beat(running)
    store.jobs.record_progress(running, {"done": 30, "total": 120, "unit": "texts", "rate": 15.0,
                                         "eta_s": 6.0, "label": "a"})
    return running


def synthetic_project(root: Path, *, scored: bool = True, integrated: bool = True,
                      trained: bool = True) -> Path:
    """A project folder with teachers, data and (optionally) scores, an integration and a run."""
    write_config(root)
    with Store(ProjectPaths(root).store) as store:
        arrays = write_scores(root, store) if scored else None
        if integrated and arrays is not None:
            write_integration(store, arrays)
        if trained:
            write_run(root, store)
    return root


def many_instances(store: Store, count: int, key: str = "big", seed: int = 0) -> None:
    """`count` synthetic integration rows (and a summary), for the responsiveness tests."""
    rng = random.Random(seed)
    words = "goal vote album oven team senate song chef match party".split()

    def rows():
        for row in range(count):
            margin = rng.random()
            first = rng.random()
            yield (row, margin, row % 2, row % 4, None, [first, max(first - margin, 0.0)],
                   " ".join(rng.choices(words, k=8)) + f" #{row}")

    replace_instances(store.connection, key, rows())
    summary = dataclasses.replace(integration_summary([0.5]), num_texts=count,
                                  conflicts=count // 10, conflict_threshold=0.1)
    record_integration(store, key, summary, IntegrationSettings(method="muki-hard"))


# -- reading and waiting for the UI --------------------------------------------------------

def run_async(test):
    """Run an `async def` test to completion (no pytest asyncio plugin needed)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def text_of(widget, width: int = 100) -> str:
    """The plain text a widget shows (a Static's content, or what a Plot renders)."""
    from textual.widgets import Static

    renderable = widget.content if isinstance(widget, Static) else widget.render()
    if isinstance(renderable, str):
        return renderable
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def cells(table) -> list[list[str]]:
    """Every row of a DataTable as plain strings."""
    return [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]


def drawn_cells(table) -> list[list[str]]:
    """What a DataTable draws, cut at its columns' drawn widths: the header, then the rows in
    view (a cell too narrow for its text shows it cut, as the user sees it)."""
    from itertools import accumulate, pairwise

    from textual.geometry import Region

    region = Region(0, 0, table.size.width, table.size.height)
    lines = [strip.text for strip in table.render_lines(region)]
    edges = list(accumulate((column.get_render_width(table) for column in table.ordered_columns),
                            initial=0))
    return [[line[start:end].strip() for start, end in pairwise(edges)]
            for line in lines[:1 + table.row_count]]


async def wait_for(pilot, condition: Callable[[], object], timeout: float = 30.0,
                   what: str = "the condition") -> None:
    """Let the app run until `condition()` is true; fail after `timeout` seconds (the async
    twin of cli_helpers.wait_until: the app runs while it waits). The deadline only ends a
    test that fails, so it is long enough for a machine busy with the other tests the suite
    runs beside this one (pytest -n)."""
    deadline = Deadline(timeout, what)
    while not condition():
        deadline.check()
        await pilot.pause(0.05)


def steady_cursors(app) -> None:
    """Stop every text box's cursor blinking, shown: a picture taken after a loaded machine
    lets half a second pass would otherwise catch the cursor off."""
    for screen in app.screen_stack:
        for box in screen.query(Input):
            box.cursor_blink = False


async def fill_form(pilot, wait: tuple[str, ...] = (), **values) -> FormScreen:
    """Type into the form just opened, by field name (text boxes and choices), once its
    fields are there (those typed into and those named in `wait`): a form pushed by a key
    press is composed on a later turn."""
    names = (*values, *wait)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, FormScreen)
                   and all(pilot.app.screen.query(f"#field-{name}") for name in names),
                   what="the form's fields")
    form = pilot.app.screen
    for name, value in values.items():
        form.query_one(f"#field-{name}").value = value
    await pilot.pause()
    return form


def record_notifications(app) -> list[str]:
    """Keep every notification's title and message (the toasts the user sees) in a list."""
    shown: list[str] = []
    notify = app.notify

    def recording(message, *, title="", **kwargs):
        shown.append(f"{title}: {message}")
        return notify(message, title=title, **kwargs)

    app.notify = recording
    return shown


def workbench(root: Path, **kwargs):
    """The app on `root` with only the packaged themes (no user theme folder)."""
    from kiwb.tui.app import WorkbenchApp
    from kiwb.tui.themes import package_themes_folder

    kwargs.setdefault("theme", "kiwb-dark")
    kwargs.setdefault("theme_folders", [package_themes_folder()])
    return WorkbenchApp(root, **kwargs)


# -- a project of five teachers (issue 31): the panes' layout beyond two ------------------

MANY_LABELS = ("devel", "doc", "golang", "haskell", "libdevel", "libs", "perl", "python",
               "rust", "utils")
MANY_TEACHERS = {f"t{index + 1}": MANY_LABELS[2 * index:2 * index + 2] for index in range(5)}
MANY_TEXTS = [f"package {index}: {MANY_LABELS[index % 10]} tools and {MANY_LABELS[(3 * index) % 10]} "
              f"bindings for the {['core', 'desktop', 'server', 'cloud'][index % 4]}"
              for index in range(20)]
MANY_GOLD = [index % 10 for index in range(20)]
MANY_KEY = "synthetic-five-teachers"


def many_teachers_project(root: Path) -> Path:
    """Five teachers of two labels each, their scores, an integration and a run: what the
    panes show when a user brings more than two teachers (fixed arithmetic, no RNG)."""
    for name, labels in MANY_TEACHERS.items():
        write_teacher(root / "teachers" / name, labels)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "unlabeled.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in MANY_TEXTS))
    (data / "eval.jsonl").write_text("".join(
        json.dumps({"text": t, "label": MANY_LABELS[g]}) + "\n"
        for t, g in zip(MANY_TEXTS, MANY_GOLD, strict=True)))
    write_new_project(
        root, name="five",
        teachers=[TeacherConfig(name, f"teachers/{name}") for name in MANY_TEACHERS],
        unlabeled=DatasetConfig("data/unlabeled.jsonl"),
        eval=DatasetConfig("data/eval.jsonl", label_column="label"))
    paths = ProjectPaths(root)
    paths.make_layout()
    with Store(paths.store) as store:
        arrays = []
        for index, (teacher, labels) in enumerate(MANY_TEACHERS.items()):
            key = f"score-{teacher}"
            store.register_score_set(key, teacher=teacher, dataset="unlabeled",
                                     num_texts=len(MANY_TEXTS), num_shards=1,
                                     meta={"labels": list(labels), "shard_size": 32})
            store.claim_shard(key, 0, "test")
            found = scores(index, len(MANY_TEXTS), seed=index + 1)
            buffer = io.BytesIO()
            np.savez(buffer, **found)
            paths.score_dir(key).mkdir(parents=True, exist_ok=True)
            paths.shard_file(key, 0).write_bytes(buffer.getvalue())
            store.finish_shard(key, 0, rows=len(MANY_TEXTS), seconds=1.0)
            shard = ScoreShard(teacher=teacher, dataset="unlabeled", key=key, shard=0,
                               rows=len(MANY_TEXTS), seconds=1.0,
                               mc_confidence_hist=_histogram(found["mc_confidence"]),
                               det_confidence_hist=_histogram(found["det_confidence"]))
            store.append_event(shard.kind, shard.to_dict())
            arrays.append(found)
        _many_integration(store, arrays)
        _many_run(root, store)
    return root


def _many_integration(store: Store, arrays) -> None:
    mc = np.stack([found["mc_confidence"] for found in arrays], axis=1)
    ordered = np.sort(mc, axis=1)
    margins = (ordered[:, -1] - ordered[:, -2]).tolist()
    routed = mc.argmax(1).tolist()
    names = list(MANY_TEACHERS)
    wins = {name: routed.count(index) for index, name in enumerate(names)}
    teachers = {name: TeacherRouting(
        share=round(wins[name] / len(routed), 2), split=0.3 + 0.08 * index,
        histogram_here=[0] * (10 + index) + [1, 2, 1] + [0] * (7 - index),
        histogram_elsewhere=[1, 2, 2, 1] + [0] * 16) for index, name in enumerate(names)}
    summary = IntegrationSummary(
        num_texts=len(MANY_TEXTS), labels=list(MANY_LABELS), overlapping_labels=[],
        per_teacher=teacher_facts(names, [f"score-{name}" for name in names],
                                  [wins[name] for name in names],
                                  labels=list(MANY_TEACHERS.values()), routing=teachers),
        margin_quantiles={"0.0": 0.0, "0.5": float(np.median(margins)), "1.0": max(margins)},
        margin_histogram=_histogram(margins), conflict_threshold=0.1,
        conflicts=int((np.asarray(margins) < 0.1).sum()),
        routing=RoutingDetails(name="rank", labeled_texts=0),
        teachers_kind="sequence",
        routing_accuracy=RoutingAccuracy(mc_dropout=0.7, plain_confidence=0.55, chosen=0.75),
        eval=EvalSummary(
            num_texts=len(MANY_TEXTS),
            routing_accuracy=RoutingAccuracy(mc_dropout=0.7, plain_confidence=0.5, chosen=0.75),
            ensemble_accuracy=0.6,
            teacher_accuracy={name: round(0.1 + 0.02 * index, 2)
                              for index, name in enumerate(names)},
            confidence_histograms={
                "mc_dropout": {"right_teacher": [0] * 12 + [1, 2, 3, 4, 3, 2, 1, 1],
                               "wrong_teacher": [3, 5, 4, 2, 1] + [0] * 15},
                "plain_confidence": {"right_teacher": [0] * 14 + [1, 2, 3, 4, 4, 2],
                                  "wrong_teacher": [0] * 10 + [2, 3, 4, 3, 2, 1, 0, 0, 0, 0]}}))
    rows = [(row, margins[row], routed[row],
             2 * routed[row] + int(arrays[routed[row]]["det_probs"][row].argmax()),
             MANY_GOLD[row], mc[row].tolist(), MANY_TEXTS[row]) for row in range(len(MANY_TEXTS))]
    record_integration(store, MANY_KEY, summary,
                       IntegrationSettings(method="muki-hard", conflict_threshold=0.1))
    replace_instances(store.connection, MANY_KEY, rows)


def _many_run(root: Path, store: Store) -> None:
    """A finished MUKI-Hard run over the ten labels (the learning check from its confusion)."""
    from kiwb.core.learning_check import check_on_eval

    # five eval texts a class: the fewest the learning check judges a class on
    confusion = [[5 if row == column else 0 for column in range(10)] for row in range(10)]
    confusion[5][4], confusion[5][5] = 5, 0  # libs taken for libdevel
    check = check_on_eval(list(MANY_LABELS), confusion)
    accuracy = 0.9
    per_class = {label: (0.0 if label == "libs" else 1.0) for label in MANY_LABELS}

    def event(record) -> None:
        store.append_event(record.kind, record.to_dict(), run=RUN)

    event(TrainStart(step=0, total_steps=20, method="muki-hard", routing="rank"))
    for step in (10, 20):
        event(TrainStep(step=step, loss=1.0 / step, lr=1e-4, texts_per_s=80.0, total_steps=20))
        event(TrainEval(step=step, accuracy=accuracy, metric="accuracy", macro_f1=accuracy - 0.08,
                        per_class_accuracy=per_class, confusion=confusion, num_texts=20,
                        routing_accuracy=RoutingAccuracy(mc_dropout=0.7, plain_confidence=0.5,
                                                         chosen=0.75),
                        check=check))
    event(TrainDone(step=20, best=BestCheckpoint(step=20, accuracy=accuracy, check=check)))
    run_dir = ProjectPaths(root).run_dir(RUN)
    write_checkpoints(run_dir, (20,), {"accuracy": accuracy})
    (run_dir / "manifest.json").write_text(json.dumps(
        {"labels": list(MANY_LABELS), "method": {"method": "muki-hard"}}))


# music is lost at the routing: its owner says it on 90% of its eval texts, the routing sends
# 20% to that owner. The run's kept evaluation (write_run's) gives the student's recall.
FUNNEL = ClassFunnel(
    labels=["sports", "politics", "music", "cooking"],
    owners={"sports": ["a"], "politics": ["a"], "music": ["b"], "cooking": ["b"]},
    num_texts=200, owner_says=[60, 70, 40, 30], routed_to_owner=[55, 60, 8, 28],
    target_texts=[70, 80, 10, 40], target_share=[0.35, 0.4, 0.05, 0.2],
    estimated_share=[0.3, 0.3, 0.2, 0.2],
    labeled=LabeledFunnel(where="eval", gold=[3, 2, 5, 0], owner_recall=[1.0, 1.0, 0.9, None],
                          routed_recall=[1.0, 1.0, 0.2, None],
                          target_recall=[1.0, 0.5, 0.2, None]))
