"""The CLI's tables on a narrow terminal: piped output is 80 columns wide unless $COLUMNS
says otherwise. The label of a `kiwb labels list` row and who gave it, a job's id, kind, run,
status and progress, a teacher's figures and a class's accuracy are shown whole; only free
text (a labeled text) is cut, and long headers, dates and devices wrap.

First the table functions on a Console of a set width, then the real CLI, piped, on the tiny
scored project."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import kiwb_env
from rich.cells import cell_len
from rich.console import Console
from tiny import make_texts, write_jsonl

from kiwb.console import FittedTable

LONG_TEXT = ("the referee stopped the match twice before the coach of the visiting team walked "
             "onto the pitch to argue about the second goal")


def rendered(table, width: int) -> list[str]:
    """The table's lines on a console `width` columns wide, none wider."""
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    lines = console.export_text().splitlines()
    assert all(cell_len(line) <= width for line in lines), "\n".join(lines)
    return lines


def boxed_rows(lines: list[str]) -> list[list[str]]:
    """The cells of each body line of a boxed table."""
    return [[cell.strip() for cell in line.strip().strip("│").split("│")]
            for line in lines if line.startswith("│")]


@pytest.mark.parametrize("width", [80, 50, 36])
def test_only_the_flexible_column_narrows(width):
    table = FittedTable("label", "text", "by", cut=("text",))
    table.add_row("politics", LONG_TEXT, "ada@lab-gpu-07")
    table.add_row("none", "[/] not markup [bold]", "bo@h")
    rows = boxed_rows(rendered(table, width))
    assert [row[0] for row in rows] == ["politics", "none"]
    assert [row[2] for row in rows] == ["ada@lab-gpu-07", "bo@h"]
    assert rows[0][1].endswith("…") and LONG_TEXT.startswith(rows[0][1][:-1])
    assert len(rows) == 2  # the text is cut on its line, not wrapped onto more


def test_a_flexible_column_the_table_lacks_is_refused():
    table = FittedTable("label", "text", cut=("txt",))
    with pytest.raises(ValueError, match="no column 'txt'"):
        table.add_row("sports", "a text")


@pytest.mark.parametrize("width", [80, 40])
def test_labels_table_keeps_each_label_and_who_gave_it(width):
    from kiwb.labels_command import labels_table
    from kiwb.project.labels import GivenLabel

    given = [GivenLabel("h1", LONG_TEXT, "sports", 0.0, "ada", "lab-gpu-07"),
             GivenLabel("h2", "music [/i] with brackets", None, 0.0, "ada", "lab-gpu-07"),
             GivenLabel("h3", "short", "cooking", 0.0, "bo", "h")]
    rows = boxed_rows(rendered(labels_table(given), width))
    assert [(row[0], row[2]) for row in rows] == [
        ("sports", "ada@lab-gpu-07"), ("none", "ada@lab-gpu-07"), ("cooking", "bo@h")]
    assert rows[2][1] == "short" and rows[0][1].endswith("…")


def _job(job_id: int, kind: str, run: str, status: str, progress=None, device="cpu", ending=None):
    from kiwb.project.jobs import JobState

    now = time.time()
    return JobState(id=job_id, kind=kind, run=run, settings={}, pid=None, host=None,
                    device=device, log_path=None, created_at=now - 62, started_at=now - 62,
                    ended_at=now, heartbeat_at=now, status=status, progress=progress,
                    ending=ending)


JOBS = [
    _job(7, "score", "scores", "finished", {"done": 4800, "total": 4800}, device="cuda:0",
         ending={"gpu": "NVIDIA H100 80GB HBM3", "precision": "bfloat16", "peak_memory_gb": 3.2}),
    _job(8, "integrate", "integration", "finished"),
    _job(9, "train", "muki-hard-trust-labels", "finished", {"done": 400, "total": 400},
         ending={"check": {"status": "collapsed", "problem": "never predicts music",
                           "hint": "train longer"}}),
    _job(10, "export", "muki-hard", "running"),
]


@pytest.mark.parametrize(("width", "headers"), [
    (120, ["job", "kind", "run", "status", "progress", "started", "duration", "device"]),
    (90, ["job", "kind", "run", "status", "progress", "started", "duration"]),
    (80, ["job", "kind", "run", "status", "progress", "duration"]),
])
def test_jobs_table_keeps_what_names_a_job_and_its_state(width, headers):
    """The device, then the start, give way; the rest is shown whole."""
    from kiwb.commands import jobs_table

    lines = rendered(jobs_table(JOBS), width)
    assert lines[0].split() == headers
    rows = {line.split()[0]: line for line in lines[1:] if line[:1].isdigit()}
    assert rows["7"].split()[:4] == ["7", "score", "finished", "4,800/4,800"]
    assert rows["8"].split()[:3] == ["8", "integrate", "finished"]
    assert rows["9"].split()[:5] == ["9", "train", "muki-hard-trust-labels", "finished", "400/400"]
    assert rows["10"].split()[:4] == ["10", "export", "muki-hard", "running"]
    assert all("1m 02s" in row for row in rows.values())
    assert "⚠ collapsed" in "\n".join(lines) and "…" not in "\n".join(lines)
    if "started" in headers:
        assert re.search(r"\d\d-\d\d \d\d:\d\d", rows["7"])
    if "device" in headers:
        assert "cuda:0 · NVIDIA H100 80GB HBM3" in rows["7"]


def test_evaluation_and_demo_tables_at_80_columns():
    from kiwb.demo.headless import results_table
    from kiwb.demo.recipe import STUDENTS, TEACHERS
    from kiwb.report import evaluation_table

    report = {"run": "muki-hard-trust-labels", "checkpoint": "step-0000400",
              "data": "/data/projects/news/eval.jsonl", "accuracy": 0.875, "macro_f1": 0.8,
              "per_class_accuracy": {"sports": 1.0, "politics_and_government_affairs": 0.75}}
    rows = boxed_rows(rendered(evaluation_table(report), 80))
    assert rows[:2] == [["sports", "100.0%"], ["politics_and_government_affairs", "75.0%"]]
    results = {"eval_texts": 200, "teachers": dict.fromkeys(TEACHERS, 0.5), "ensemble": 0.9,
               "students": {name: {"accuracy": 0.91, "macro_f1": 0.9, "check": {"status": "ok"}}
                            for name in STUDENTS},
               "routing": {"routing": "rank", "chosen": 0.9, "mc_dropout": 0.8,
                           "plain_confidence": 0.7}}
    weak = next(iter(STUDENTS))
    results["students"][weak]["check"] = {"status": "below-reference", "problem": "below the Ensemble"}
    lines = rendered(results_table(results), 80)
    for name in STUDENTS:  # each student marked against the Ensemble, whole at 80 columns
        mark = "⚠ below" if name == weak else "ok"
        assert re.search(rf"│ student · {re.escape(name)}\s+│\s+91\.0% │\s+90\.0% │ {mark}\s+│",
                         "\n".join(lines)), "\n".join(lines)


# The real CLI, piped -----------------------------------------------------------------------

def piped_kiwb(*args, cwd: Path, columns: str | None = "80") -> str:
    """`kiwb ARGS` with its output piped, as wide as `columns` (None: no $COLUMNS and no
    terminal on any of its streams, so Rich's default of 80)."""
    env = kiwb_env()
    env.pop("COLUMNS")
    if columns is not None:
        env["COLUMNS"] = columns
    result = subprocess.run([sys.executable, "-m", "kiwb", *map(str, args)], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    return result.stdout


def table_lines(shown: str) -> list[str]:
    """The lines of the first table printed (up to the first empty line), none wider than 80."""
    lines = shown.split("\n\n")[0].splitlines()
    assert all(cell_len(line) <= 80 for line in lines), shown
    return lines


@pytest.fixture(scope="module")
def project(scored_project, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the scored project with labels given by ada@lab-gpu-07, integrated (the report
    as printed at 80 columns comes with it) and one short training run."""
    root = tmp_path_factory.mktemp("tables")
    folder = shutil.copytree(scored_project, root / "proj", ignore=shutil.ignore_patterns(
        "runs", "exports"))
    pool = make_texts(160, seed=21)  # the scored project's pool
    given = [{"text": row["text"], "label": row["label"], "user": "ada", "host": "lab-gpu-07"}
             for row in pool[:8]]
    given.append({"text": LONG_TEXT, "label": "none", "user": "ada", "host": "lab-gpu-07"})
    write_jsonl(root / "given.jsonl", given)
    piped_kiwb("labels", "import", folder, root / "given.jsonl", cwd=root)
    report = piped_kiwb("integrate", folder, cwd=root)
    piped_kiwb("train", folder, "--epochs", "1", "--foreground", cwd=root)
    return folder, report


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["80", None])
def test_labels_list_piped_shows_each_label_and_who_gave_it(project, columns):
    folder, _ = project
    shown = piped_kiwb("labels", "list", folder, cwd=folder, columns=columns)
    rows = boxed_rows(table_lines(shown))
    given = {row["text"]: row["label"] for row in make_texts(160, seed=21)[:8]}
    assert sorted(row[0] for row in rows) == sorted([*given.values(), "none"])
    assert {row[2] for row in rows} == {"ada@lab-gpu-07"}
    assert any(row[1].endswith("…") for row in rows)  # the long text is what gives way


@pytest.mark.slow
def test_jobs_piped_shows_each_job_whole(project):
    folder, _ = project
    jobs = json.loads(piped_kiwb("jobs", folder, "--json", cwd=folder))
    lines = table_lines(piped_kiwb("jobs", folder, cwd=folder))
    assert {job["kind"] for job in jobs} >= {"score", "integrate", "train"}
    for job in jobs:
        row = next(line for line in lines if line.split()[:1] == [str(job["id"])])
        assert row.split()[1] == job["kind"] and "finished" in row.split()
        if job["kind"] == "train":
            assert job["run"] in row.split()
        if job["progress"]:
            assert f"{job['progress']['done']:,}/{job['progress']['total']:,}" in row.split()


@pytest.mark.slow
def test_integrate_report_at_80_columns_cuts_nothing(project):
    _, report = project
    assert "…" not in report
    lines = report.splitlines()
    assert all(cell_len(line) <= 80 for line in lines if line[:1] in "┏┃┡│└┌├"), report
    for teacher in ("a", "b"):
        row = next(row for row in boxed_rows(lines) if row[0] == teacher)
        assert re.fullmatch(r"\d+", row[1]) and all(re.fullmatch(r"[\d.]+%|–|[\d.]+", cell)
                                                      for cell in row[2:5])
    union = " ".join(cell for row in boxed_rows(lines) for cell in row)
    assert all(label in union for label in ("sports", "politics", "music", "cooking"))


@pytest.mark.slow
def test_evaluate_at_80_columns_shows_each_label(project):
    folder, _ = project
    jobs = json.loads(piped_kiwb("jobs", folder, "--json", cwd=folder))
    run = next(job["run"] for job in jobs if job["kind"] == "train")
    shown = piped_kiwb("evaluate", folder, "--run", run, cwd=folder)
    # The title names the data by its path, written whole into a pipe (kiwb.console: a path
    # cut in two could not be copied), however deep its folder; the table under it fits.
    title, table = shown.split("\n", 1)
    assert title.startswith(f"{run} · ") and title.endswith("eval.jsonl")
    rows = boxed_rows(table_lines(table))
    assert "…" not in shown
    assert [row[0] for row in rows[:4]] == ["sports", "politics", "music", "cooking"]
    assert all(re.fullmatch(r"\d+\.\d%", row[1]) for row in rows)


def test_a_progress_bar_writes_plain_lines_where_the_output_is_no_terminal(monkeypatch):
    # In a log or a pipe the bar cannot redraw: a slow step (the demo's pre-training, kiwb
    # teach) says how far it is in plain lines instead; a job prints its own (lines=False).
    import io

    from rich.console import Console

    from kiwb import console as output

    written = io.StringIO()
    monkeypatch.setattr(output, "console", Console(file=written, force_terminal=False, width=100))
    monkeypatch.setattr(output, "PROGRESS_LINE_EVERY_S", 0.0)
    with output.progress_bar("pre-train", total=4, unit="steps") as advance:
        for step in range(4):
            advance(f"pre-train · step {step + 1}", 1)
    plain = [line for line in written.getvalue().splitlines() if "/s, ETA" in line]
    assert plain[0].startswith("pre-train · step 1: 1/4 steps (") and len(plain) == 4
    written.truncate(0)
    with output.progress_bar("score", total=2, unit="texts", lines=False) as advance:
        advance("score", 2)
    assert "/s, ETA" not in written.getvalue()


@pytest.mark.slow
def test_piped_lines_are_written_whole_never_wrapped(project):
    """Into a pipe or a file (a job's log, CI) a line is not wrapped at 80 columns: a command
    or a path copied from it must not be cut in two. Tables keep their 80 columns."""
    folder, _ = project
    env = kiwb_env()
    env.pop("COLUMNS")
    result = subprocess.run([sys.executable, "-m", "kiwb", "integrate", str(folder)], cwd=folder,
                            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr
    said = next(line for line in result.stderr.splitlines() if line.startswith("Integrated "))
    assert re.search(r"conflicts under margin [\d.]+$", said), result.stderr
    assert cell_len(said) > 80  # long enough that it used to wrap
    routing = next(line for line in result.stderr.splitlines() if line.startswith("Routing: "))
    assert routing.endswith(")"), result.stderr
    assert all(cell_len(line) <= 80 for line in result.stdout.splitlines()
               if line[:1] in "┏┃┡│└┌├"), result.stdout
