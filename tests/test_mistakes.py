"""A skeptical user's mistakes (issue 59): each gets one line naming what is wrong and a
non-zero exit, or the right result; never a traceback, never a silent wrong answer. Through
the real CLI on tiny real models."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_kiwb, write_project
from conftest import TRAINING_SETTINGS
from test_bad_input import assert_refused
from tiny import make_texts, tiny_bert_config, wordpiece_tokenizer, write_jsonl


@pytest.fixture(scope="module")
def trained(tmp_path_factory, teachers_dir, student_base) -> Path:
    """A scored project with one short run (muki-hard), in a folder whose name has a space."""
    root = tmp_path_factory.mktemp("mistakes") / "my projects"
    root.mkdir()
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(64, seed=51)])
    write_jsonl(root / "eval.jsonl", make_texts(24, seed=52))
    project = write_project(root / "proj one", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            root / "pool.jsonl", root / "eval.jsonl",
                            extra=f'{TRAINING_SETTINGS}student = "{student_base}"\n')
    run_kiwb("score", project, cwd=root)
    run_kiwb("train", project, "--epochs", "1", "--min-steps", "0", "--foreground", cwd=root)
    return project


@pytest.mark.parametrize("epochs", ["0", "-1", "nan"])
def test_epochs_out_of_range_are_refused_on_the_command_line_as_in_kiwb_toml(tmp_path, epochs):
    for command in (("train", tmp_path), ("teach", "--base", "x", "--data", "y",
                                          "--labels", "a,b", "--out", tmp_path / "t")):
        assert_refused(run_kiwb(*command, "--epochs", epochs, cwd=tmp_path, check=False),
                       "--epochs: epochs must be")


@pytest.mark.slow
def test_printed_commands_paste_back_whole_where_the_path_has_spaces(trained):
    said = run_kiwb("train", trained, "--epochs", "1", "--min-steps", "0", "--run", "again",
                    "--foreground", cwd=trained.parent)
    shown = " ".join((said.stdout + said.stderr).split())
    assert f"kiwb export '{trained}' --run again" in shown


def _bert_folder(folder: Path, *, head: bool) -> Path:
    from transformers import BertForSequenceClassification, BertModel

    tokenizer = wordpiece_tokenizer(folder)
    model = (BertForSequenceClassification if head else BertModel)(
        tiny_bert_config(("x", "y"), len(tokenizer)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(("damage", "words"), [
    ("no-head", "has no trained classifier head (classifier."),
    ("no-model-type", "cannot load this model (ValueError: Unrecognized model"),
    ("truncated", "cannot load this model (SafetensorError"),
])
def test_predict_refuses_a_model_it_cannot_answer_with(tmp_path, damage, words):
    folder = _bert_folder(tmp_path / damage, head=damage != "no-head")
    if damage == "no-model-type":
        config = json.loads((folder / "config.json").read_text())
        del config["model_type"]
        (folder / "config.json").write_text(json.dumps(config))
    if damage == "truncated":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:300])
    assert_refused(run_kiwb("predict", folder, "a text", cwd=tmp_path, check=False), words,
                   str(folder))


@pytest.mark.slow
def test_export_beside_a_file_and_into_a_folder_it_cannot_write(trained, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    refused = run_kiwb("export", trained, "--run", "muki-hard", "--to", a_file, "--force",
                       cwd=tmp_path, check=False)
    # the hint names a folder of its own beside the file, not one inside it
    assert_refused(refused, "--force will not replace it", f"{tmp_path / 'notes.txt-muki-hard'}")
    assert a_file.read_text() == "mine"
    inside = run_kiwb("export", trained, "--run", "muki-hard", "--to", a_file / "student",
                      cwd=tmp_path, check=False)
    assert_refused(inside, "is a file, not a folder")
    assert "Resume with" not in inside.stdout + inside.stderr


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder on a read-only file system (a tmpfs mounted ro): what root cannot write either."""
    import subprocess

    folder = tmp_path / "read-only"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only file system here: {mounted.stderr.strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.slow
def test_export_into_a_folder_it_cannot_write_is_refused_before_it_is_a_job(trained, tmp_path,
                                                                           read_only_folder):
    before = export_jobs(trained)
    for extra in ((), ("--detach",)):
        refused = run_kiwb("export", trained, "--run", "muki-hard", "--to",
                           read_only_folder / "student", *extra, cwd=tmp_path, check=False)
        assert_refused(refused, f"{read_only_folder} cannot be written")
        assert "Resume with" not in refused.stdout + refused.stderr
    assert export_jobs(trained) == before


def export_jobs(project: Path) -> int:
    with sqlite3.connect(project / "store.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'export'").fetchone()[0]


@pytest.mark.parametrize("content", ["", "text,label\n", "\n\n\n"])
def test_an_import_with_no_label_replaces_nothing(trained, tmp_path, content):
    kept = tmp_path / "kept.csv"
    kept.write_text("text,label\nsome text,sports\n")
    run_kiwb("labels", "import", trained, kept, cwd=tmp_path)
    empty = tmp_path / ("empty.csv" if content.startswith("text") or not content else "empty.jsonl")
    empty.write_text(content)
    refused = run_kiwb("labels", "import", trained, empty, "--replace", cwd=tmp_path, check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    if content.startswith("text"):  # a header and nothing under it
        assert_refused(refused, "holds no labels", "--replace would have forgotten the 1 labels")
    with sqlite3.connect(trained / "store.sqlite") as db:
        assert db.execute("SELECT text, label FROM text_labels").fetchall() == [("some text",
                                                                                 "sports")]


def test_labels_replaced_by_mistake_come_back_from_the_history(trained, tmp_path):
    first = tmp_path / "first.csv"
    first.write_text("text,label\nalpha text,sports\nbeta text,music\n")
    run_kiwb("labels", "import", trained, first, "--replace", cwd=tmp_path)
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("text,label\ngamma text,cooking\n")
    run_kiwb("labels", "import", trained, wrong, "--replace", cwd=tmp_path)  # the mistake
    listed = " ".join(run_kiwb("labels", "history", trained, cwd=tmp_path).stdout.split())
    assert "Label history" in listed and "kiwb labels import --replace" in listed
    with sqlite3.connect(trained / "store.sqlite") as db:
        wanted = db.execute("SELECT id FROM label_sets WHERE reason = ?",
                            (f"kiwb labels import --replace {wrong}",)).fetchone()[0]
    said = run_kiwb("labels", "restore", trained, str(wanted), cwd=tmp_path).stdout
    assert "restored 2 labels" in said
    with sqlite3.connect(trained / "store.sqlite") as db:
        assert sorted(db.execute("SELECT text, label FROM text_labels")) == [
            ("alpha text", "sports"), ("beta text", "music")]
    assert_refused(run_kiwb("labels", "restore", trained, "999", cwd=tmp_path, check=False),
                   "no set 999 in the label history")


@pytest.mark.slow
def test_a_resume_with_other_settings_is_refused_before_its_job_is_recorded(trained, tmp_path):
    def train_jobs() -> int:
        with sqlite3.connect(trained / "store.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'train'").fetchone()[0]

    before = train_jobs()
    for extra in (("--detach",), ("--foreground",)):
        refused = run_kiwb("train", trained, "--resume", "--epochs", "3", *extra, cwd=tmp_path,
                           check=False)
        assert_refused(refused, "cannot resume run 'muki-hard': the training settings changed",
                       "epochs: 1.0 -> 3.0")
    assert train_jobs() == before  # refused before a job was recorded, detached or not
