"""Bad input through the real CLI: one `kiwb: error:` line naming the culprit, no traceback, no debris."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from tiny import TEACHER_A_LABELS, build_teacher, tiny_bert_config, wordpiece_tokenizer

DEVICE_FORMS = "auto, cpu, cuda, cuda:N or mps"  # every device refusal lists them
SMALL_SCORING = 'mc_passes = 2\nshard_size = 16\ndevice = "cpu"\n'
GOOD_TEACHERS = (("a", "teacher_a", None), ("b", "teacher_b", None))


def run_kiwb(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m kiwb ARGS` as a user would run it, offline."""
    return subprocess.run(
        [sys.executable, "-m", "kiwb", *map(str, args)], cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=180,
    )


def assert_refused(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """A non-zero exit with exactly one `kiwb: error:` line on stderr holding every fragment."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    message = lines[0]
    assert message.startswith("kiwb: error: "), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from: {message}"
    return message


def score_files(project: Path) -> list[Path]:
    return [path for path in (project / "scores").rglob("*") if path.is_file()]


def write_project(
    project: Path, teachers, unlabeled: Path, *, scoring: str = SMALL_SCORING,
) -> Path:
    """A hand-written kiwb.toml; teachers are (name, path, labels override or None)."""
    project.mkdir(parents=True, exist_ok=True)
    lines = ['name = "bad-input"']
    for name, path, labels in teachers:
        lines += ["[[teachers]]", f"name = {json.dumps(name)}", f"path = {json.dumps(str(path))}"]
        if labels is not None:
            lines.append(f"labels = {json.dumps(list(labels))}")
    lines += ["[data.unlabeled]", f"path = {json.dumps(str(unlabeled))}", "[scoring]", scoring]
    (project / "kiwb.toml").write_text("\n".join(lines), encoding="utf-8")
    return project


def save_bert(folder: Path, tokenizer, labels: tuple[str, ...] | None = TEACHER_A_LABELS, *,
              num_labels: int = 2, bare: bool = False) -> Path:
    """An untrained tiny BERT checkpoint; labels None keeps transformers' LABEL_0, LABEL_1, ..."""
    from transformers import BertForSequenceClassification, BertModel

    config = tiny_bert_config(labels or ("unnamed",), len(tokenizer))
    if labels is None:
        config.id2label = None
        config.num_labels = num_labels  # regenerates the default generic names
    (BertModel if bare else BertForSequenceClassification)(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def bad_teachers(tmp_path_factory) -> Path:
    """Checkpoint folders that are not usable teachers, one per way of being wrong."""
    root = tmp_path_factory.mktemp("bad_teachers")
    tokenizer = wordpiece_tokenizer(root)
    tokenizer.save_pretrained(root / "no_config")  # tokenizer files only
    save_bert(root / "bare", tokenizer, bare=True)
    save_bert(root / "generic", tokenizer, labels=None)
    save_bert(root / "one_label", tokenizer, labels=("relevance",))
    save_bert(root / "one_label_default", tokenizer, labels=None, num_labels=1)
    save_remote_code(root / "remote_code", tokenizer)
    return root


REMOTE_MARKER = "remote-code-ran"


def save_remote_code(folder: Path, tokenizer) -> Path:
    """A checkpoint whose config names custom code (auto_map) that leaves a mark when run."""
    save_bert(folder, tokenizer)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="kiwb-remote-test", architectures=["RemoteForSequenceClassification"],
                  auto_map={"AutoConfig": "remote_code.RemoteConfig"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "remote_code.py").write_text(
        "from pathlib import Path\nfrom transformers import BertConfig\n"
        f"Path({str(folder / REMOTE_MARKER)!r}).write_text('ran')\n"
        "class RemoteConfig(BertConfig):\n    model_type = 'kiwb-remote-test'\n")
    return folder


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad_data")
    (root / "body.jsonl").write_text('{"body": "goal scored"}\n{"body": "new album"}\n', encoding="utf-8")
    (root / "empty.jsonl").write_bytes(b"")
    (root / "header_only.csv").write_text("text\n", encoding="utf-8")
    (root / "latin1.csv").write_bytes("text\ncaf\xe9 au lait\n".encode("latin-1"))
    return root


@dataclass(frozen=True)
class Case:
    """A hand-written project, the command run on it and the words its error line must hold."""

    fragments: tuple[str, ...] = ()
    teachers: tuple = GOOD_TEACHERS  # (name, folder name or literal path, labels override)
    data: str = "unlabeled.jsonl"
    scoring: str = SMALL_SCORING
    command: str = "score"
    at_config_load: bool = False  # refused before the project folder is even opened
    options: tuple[str, ...] = ()  # after the project folder on the command line


REFUSALS = {
    "missing-checkpoint": Case(
        ("kiwb.toml", "teachers[2].path", "nope", "does not exist", "checkpoint folder"),
        teachers=(("a", "teacher_a", None), ("b", "./nope", None)), at_config_load=True,
    ),
    "no-config-json": Case(
        ("teacher 'bad'", "no_config", "no config.json", "save_pretrained"),
        teachers=(("good", "teacher_b", None), ("bad", "no_config", None)),
    ),
    "bare-BertModel": Case(
        ("teacher 'bad'", "bare", "not a sequence classifier", "BertModel",
         "ForSequenceClassification"),
        teachers=(("good", "teacher_b", None), ("bad", "bare", None)),
    ),
    "generic-labels": Case(
        ("teacher 'bad'", "generic", "LABEL_0, LABEL_1", "labels = [...]", "[[teachers]]"),
        teachers=(("good", "teacher_b", None), ("bad", "generic", None)),
    ),
    "one-label": Case(
        ("teacher 'bad'", "one_label", "only 1 label", "two or more"),
        teachers=(("good", "teacher_b", None), ("bad", "one_label", None)),
    ),
    # A one-output head keeps the default name LABEL_0: no labels override can fix that.
    "one-label-default-name": Case(
        ("teacher 'bad'", "one_label_default", "only 1 label", "two or more"),
        teachers=(("good", "teacher_b", None), ("bad", "one_label_default", None)),
    ),
    "one-label-override": Case(
        ("kiwb.toml", "teachers[2].labels", "at least 2 names"),
        teachers=(("good", "teacher_b", None), ("bad", "one_label_default", ("relevance",))),
        at_config_load=True,
    ),
    "remote-code": Case(
        ("teacher 'bad'", "remote_code", "its own model code", "trust_remote_code = true",
         "[[teachers]]"),
        teachers=(("good", "teacher_b", None), ("bad", "remote_code", None)),
    ),
    "missing-text-column": Case(
        ("body.jsonl", "no column 'text'", "columns: body", "text_column", "[data.unlabeled]"),
        data="body.jsonl",
    ),
    "empty-jsonl": Case(("empty.jsonl", "empty", "at least one text"), data="empty.jsonl"),
    "header-only-csv": Case(
        ("header_only.csv", "no rows", "at least one text"), data="header_only.csv"
    ),
    "not-utf8": Case(("latin1.csv", "not valid UTF-8", "0xe9", "re-save"), data="latin1.csv"),
    "unknown-key": Case(
        ("kiwb.toml", "[scoring] mc_pases", "not a known key", 'did you mean "mc_passes"'),
        scoring=SMALL_SCORING.replace("mc_passes", "mc_pases"), at_config_load=True,
    ),
    "one-teacher": Case(
        ("kiwb.toml", "1 teacher", "two or more", "add another [[teachers]]"),
        teachers=GOOD_TEACHERS[:1], at_config_load=True,
    ),
    "integrate-before-score": Case(
        ("teacher 'a'", "incomplete", "run: kiwb score"), command="integrate"
    ),
    # A misspelt device never reaches torch.device (a traceback, a failed job and a resume hint
    # that repeats the typo): refused before a job is recorded, naming the accepted forms.
    "devices-typo": Case(
        ("--devices 'foo'", "unknown device 'foo'", DEVICE_FORMS, "or all"),
        options=("--devices", "foo", "--foreground"), at_config_load=True,
    ),
    "devices-typo-in-a-list": Case(
        ("--devices 'cpu,cuda:01'", "unknown device 'cuda:01'", DEVICE_FORMS, "or all"),
        options=("--devices", "cpu,cuda:01"), at_config_load=True,
    ),
    "device-typo": Case(
        ("--device 'foo'", "unknown device", DEVICE_FORMS), options=("--device", "foo"),
        at_config_load=True,
    ),
    "train-device-typo": Case(
        ("--device 'gpu'", "unknown device", DEVICE_FORMS), command="train",
        options=("--device", "gpu", "--foreground"), at_config_load=True,
    ),
    "config-device-typo": Case(
        ("kiwb.toml", "[scoring] device", 'got "gpu"', DEVICE_FORMS),
        scoring=SMALL_SCORING.replace('device = "cpu"', 'device = "gpu"'), at_config_load=True,
    ),
}
DEVICE_TYPOS = [case for case in REFUSALS if "device" in case]
# The generic-labels teacher again, now with its real names given in kiwb.toml: it scores.
ACCEPTED = "generic-labels-with-override"
ACCEPTED_TEACHERS = (("generic", "generic", ("news", "weather")), ("b", "teacher_b", None))


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory, teachers_dir, data_dir, bad_teachers, bad_data):
    """Every REFUSALS case, and the ACCEPTED one, run once and in parallel (mostly start-up time)."""
    folders = {path.name: path for root in (teachers_dir, bad_teachers) for path in root.iterdir()}
    files = {path.name: path for root in (data_dir, bad_data) for path in root.iterdir()}
    root = tmp_path_factory.mktemp("cli_runs")
    cases = {ACCEPTED: Case(teachers=ACCEPTED_TEACHERS), **REFUSALS}  # the slowest run first

    def run(case: str) -> tuple[Path, subprocess.CompletedProcess]:
        spec = cases[case]
        teachers = [(name, folders.get(where, where), labels) for name, where, labels in spec.teachers]
        project = write_project(root / case / "proj", teachers, files[spec.data], scoring=spec.scoring)
        return project, run_kiwb(spec.command, project, *spec.options, cwd=root / case)

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return dict(zip(cases, pool.map(run, cases), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("case", REFUSALS)
def test_bad_input_is_refused_in_one_line(cli_runs, case):
    project, result = cli_runs[case]
    assert_refused(result, *REFUSALS[case].fragments)
    assert score_files(project) == []
    if REFUSALS[case].at_config_load:
        assert not (project / "store.sqlite").exists()
        assert not (project / "scores").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", DEVICE_TYPOS)
def test_a_misspelt_device_records_no_job(cli_runs, case):
    """Exit 2 as for any bad input, no resume hint, and no job: not even the store exists,
    so `kiwb jobs` has nothing to list."""
    project, result = cli_runs[case]
    assert result.returncode == 2, result.stderr
    assert "Resume with" not in result.stdout + result.stderr
    assert not (project / "store.sqlite").exists()
    listed = run_kiwb("jobs", project, cwd=project.parent)
    assert_refused(listed, "no kiwb project store here")


def test_teach_refuses_a_misspelt_device_before_reading_anything(tmp_path, data_dir):
    result = run_kiwb("teach", "--base", tmp_path / "base", "--data", data_dir / "eval.jsonl",
                      "--labels", "a,b", "--out", tmp_path / "out", "--device", "cuda:1.0",
                      cwd=tmp_path)
    assert result.returncode == 2
    assert_refused(result, "--device 'cuda:1.0'", "unknown device", DEVICE_FORMS)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_remote_code_never_runs_without_the_opt_in(cli_runs, bad_teachers):
    """`kiwb score` really met the remote-code teacher (refused in one line naming the opt-in)
    and its model code never ran: the marker file that code writes is absent."""
    project, result = cli_runs["remote-code"]
    assert_refused(result, *REFUSALS["remote-code"].fragments)
    assert "trust_remote_code = true" in result.stderr and score_files(project) == []
    assert not (bad_teachers / "remote_code" / REMOTE_MARKER).exists()


def test_remote_code_runs_once_the_teacher_opts_in(bad_teachers):
    from kiwb.workers.teachers import inspect_teacher

    folder = bad_teachers / "remote_code"
    info = inspect_teacher("custom", str(folder), trust_remote_code=True)
    assert (folder / REMOTE_MARKER).read_text() == "ran"
    assert info.model_type == "kiwb-remote-test" and info.labels == tuple(TEACHER_A_LABELS)
    (folder / REMOTE_MARKER).unlink()


@pytest.mark.slow
def test_labels_override_makes_a_generic_teacher_usable(cli_runs):
    project, result = cli_runs[ACCEPTED]
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    # two teachers, 48 texts in shards of 16: MC scores, and each teacher's representation
    assert len(score_files(project)) == 2 * 2 * 3


@pytest.mark.parametrize(("option", "missing", "instead"), [
    ("--teacher", "b=./nope", "a Hub id like org/model"),
    ("--teacher", "b=models/teachers/b", "a Hub id like org/model"),  # not org/name: a path
    ("--unlabeled", "./texts.csv", "hf://datasets/ORG/NAME for a Hub data set"),
    ("--student", "~/no-such-base", "a Hub id like org/model")])
def test_init_refuses_a_missing_path_as_typed_without_writing(tmp_path, teachers_dir, data_dir,
                                                               option, missing, instead):
    """A path typed from the shell's folder, missing, is named as typed and where it was looked
    for (kiwb.toml would read it from the project's folder: a path the user never meant)."""
    given = {"--teacher": [f"a={teachers_dir / 'teacher_a'}"],
             "--unlabeled": [data_dir / "unlabeled.jsonl"], "--student": []}
    given[option] = [*given[option], missing] if option == "--teacher" else [missing]
    options = [word for flag, values in given.items() for value in values for word in (flag, value)]
    if option != "--teacher":
        options += ["--teacher", f"b={teachers_dir / 'teacher_b'}"]
    result = run_kiwb("init", "proj", *options, cwd=tmp_path)
    assert_refused(result, f"{option} {missing}: no such file or folder from {tmp_path}; give a "
                           f"path from this folder, or {instead}")
    assert not (tmp_path / "proj").exists()


def test_init_refuses_an_existing_project_unless_forced(tmp_path, teachers_dir, data_dir):
    options = ["--teacher", f"a={teachers_dir / 'teacher_a'}", "--teacher",
               f"b={teachers_dir / 'teacher_b'}", "--unlabeled", data_dir / "unlabeled.jsonl"]
    toml = tmp_path / "proj" / "kiwb.toml"
    first = run_kiwb("init", "proj", *options, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = toml.read_bytes()

    refused = run_kiwb("init", "proj", "--name", "renamed", *options, cwd=tmp_path)
    assert_refused(refused, str(toml), "already exists", "--force")
    assert toml.read_bytes() == before

    forced = run_kiwb("init", "proj", "--name", "renamed", "--force", *options, cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert 'name = "renamed"' in toml.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [("init",), ("jobs", "--json")])
def test_a_reader_that_went_away_ends_quietly(tmp_path, command):
    """`kiwb ... | head -0`: the pipe's reader is gone before kiwb writes. That is not kiwb's
    failure: no traceback, no 'Exception ignored', and exit 1 whether the output goes through
    Rich (init) or a plain print (jobs --json)."""
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    project = tmp_path / "p"
    if command[0] != "init":
        assert run_kiwb("init", project, cwd=tmp_path).returncode == 0
        paths = ProjectPaths(project)
        paths.make_layout()
        Store(paths.store).close()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "kiwb", *command, str(project)],
                                stdout=write_end, stderr=subprocess.PIPE, text=True,
                                cwd=tmp_path, timeout=60)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (1, "")
    assert (project / "kiwb.toml").is_file()  # the work was done; only its report was lost


@pytest.mark.parametrize(("name", "no_text", "no_label", "where"), [
    ("d.jsonl", '{"text": "a", "label": "x"}\n{"text": null, "label": "y"}\n',
     '{"text": "a", "label": "x"}\n{"text": "b", "label": null}\n', "line 2"),
    ("d.csv", "text,label\na,x\n,y\n", "text,label\na,x\nb,\n", "line 3"),  # after the header
    # a blank line the reader skips, and a quoted line break, still counted as the editor does
    ("e.jsonl", '{"text": "a", "label": "x"}\n\n{"text": null, "label": "y"}\n',
     '{"text": "a", "label": "x"}\n\n{"text": "b", "label": null}\n', "line 3"),
    ("e.csv", 'text,label\n"a\nb",x\n,y\n', 'text,label\n"a\nb",x\nc,\n', "line 4"),
])
def test_a_bad_row_is_named_as_an_editor_numbers_it(tmp_path, name, no_text, no_label, where):
    from kiwb.errors import DataError
    from kiwb.workers.data import load_table

    path = tmp_path / name
    path.write_text(no_text, encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_table(str(path))
    assert str(refused.value) == (f"{path}: {where} of column 'text' is None, not a text; "
                                  "remove or fill that row")
    path.write_text(no_label, encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_table(str(path), label_column="label")
    assert str(refused.value) == f"{path}: {where} has no label; remove it or give it one"


def test_predict_in_a_terminal_of_80_columns_keeps_the_text_off_the_scores_line():
    from rich.console import Console

    from kiwb.commands import print_predictions

    line = ("[bold]politics[/bold]\tpolitics 91.2%  sports 5.0%  music 2.1%\tThe Parliament "
            "passed the budget bill after a long debate on the new taxes")
    terminal = Console(width=80, force_terminal=True, record=True)
    print_predictions(terminal, [line])
    assert terminal.export_text().splitlines() == [
        "politics  politics 91.2%  sports 5.0%  music 2.1%",
        "  The Parliament passed the budget bill after a long debate on the new taxes"]
    pipe = Console(width=80, force_terminal=False, record=True)
    print_predictions(pipe, [line])  # for scripts: one line per text, never wrapped
    printed = pipe.export_text()
    assert printed.count("\n") == 1 and printed.startswith("politics ")
    assert printed.endswith("passed the budget bill after a long debate on the new taxes\n")


def test_predict_given_no_texts_in_a_terminal_says_what_it_waits_for(tmp_path):
    """Texts typed into a terminal (a real pseudo-terminal on stdin, ended by Ctrl-D): kiwb
    asks for them first, where it would otherwise wait without a word, then classifies them."""
    import pty

    model = build_teacher(tmp_path / "model", "bert", TEACHER_A_LABELS, trained=False)
    typing, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "kiwb", "predict", str(model)], stdin=terminal,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"})
        os.write(typing, b"the striker scored a late goal\n\x04")  # a line, then Ctrl-D
        out, err = process.communicate(timeout=180)
    finally:
        os.close(terminal)
        os.close(typing)
    assert process.returncode == 0, err
    assert "Type the texts, one per line; Ctrl-D to classify them" in err
    assert out.split()[0] in TEACHER_A_LABELS and "the striker scored a late goal" in out


def test_a_text_with_tabs_or_line_breaks_is_shown_on_one_line():
    """Each kind runtime's predict shows a text beside its answers, separated by a tab, ended by a line."""
    from kiwb.console import one_line

    assert one_line("Parliament\tpassed the\nbudget  bill ") == "Parliament passed the budget bill"
