"""Atomic folder writes survive a process killed at any moment, and what it left is cleared."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kiwb.project.atomic import atomic_directory, recover_interrupted_writes

# A writer that replaces `target` (holding "old") with a folder holding "new", and stops to
# be killed where it is told: while still writing, or between the two renames of a replace.
WRITER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from kiwb.project import atomic

    target, moment = Path(sys.argv[1]), sys.argv[2]
    real_replace = os.replace

    def replace(source, destination):
        real_replace(source, destination)
        if moment == "between-renames" and Path(source) == target:
            print("stopped", flush=True)
            time.sleep(600)

    atomic.os.replace = replace
    with atomic.atomic_directory(target) as staging:
        (staging / "weights.bin").write_bytes(os.urandom(4 << 20))
        (staging / "state.txt").write_text("new")
        if moment == "mid-write":
            print("stopped", flush=True)
            time.sleep(600)
""")


def _killed_writer(target: Path, moment: str) -> None:
    """Run WRITER on `target` and SIGKILL it once it says it has stopped at `moment`."""
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target), moment],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "stopped"
    writer.send_signal(signal.SIGKILL)
    writer.wait()


def _old_folder(tmp_path: Path) -> Path:
    target = tmp_path / "step-0000010"
    target.mkdir()
    (target / "state.txt").write_text("old")
    return target


def _leftovers(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir() if entry.name.startswith("."))


def test_a_kill_while_writing_keeps_the_old_folder_and_recovery_clears_the_staging(tmp_path):
    target = _old_folder(tmp_path)
    _killed_writer(target, "mid-write")
    assert (target / "state.txt").read_text() == "old"
    assert len(_leftovers(tmp_path)) == 1  # the half-written staging folder

    recover_interrupted_writes(tmp_path)
    assert _leftovers(tmp_path) == [] and (target / "state.txt").read_text() == "old"


def test_a_kill_between_the_renames_of_a_replace_puts_the_old_folder_back(tmp_path):
    target = _old_folder(tmp_path)
    _killed_writer(target, "between-renames")
    assert not target.exists()  # the moment a crash used to lose the folder

    recover_interrupted_writes(tmp_path)
    assert (target / "state.txt").read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_a_retired_folder_left_after_the_replace_is_deleted(tmp_path):
    target = _old_folder(tmp_path)
    with atomic_directory(target) as staging:
        (staging / "state.txt").write_text("new")
    retired = tmp_path / f".{target.name}.old-4242"  # as if killed before its deletion
    retired.mkdir()
    (retired / "state.txt").write_text("old")

    recover_interrupted_writes(tmp_path)
    assert (target / "state.txt").read_text() == "new" and _leftovers(tmp_path) == []


def test_recovery_for_one_name_leaves_other_names_alone(tmp_path):
    mine, other = tmp_path / ".student.abcd1234.tmp", tmp_path / ".student-v2.abcd1234.tmp"
    for staging in (mine, other):
        staging.mkdir()
    (tmp_path / ".notes").write_text("not ours")

    recover_interrupted_writes(tmp_path, "student")
    assert _leftovers(tmp_path) == [".notes", other.name]


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    target = _old_folder(tmp_path)
    with pytest.raises(RuntimeError), atomic_directory(target) as staging:
        (staging / "state.txt").write_text("new")
        raise RuntimeError("disk full")
    assert (target / "state.txt").read_text() == "old" and _leftovers(tmp_path) == []


def test_checkpoint_of_an_existing_step_is_not_written_again(tmp_path, student_base):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers import checkpoints as ckpt

    model = AutoModelForSequenceClassification.from_pretrained(student_base)
    tokenizer = AutoTokenizer.from_pretrained(student_base)
    first = ckpt.save_checkpoint(tmp_path, 10, model, tokenizer, {}, {"step": 10, "evaluation": {"accuracy": 0.5}})
    inode = first.stat().st_ino
    again = ckpt.save_checkpoint(tmp_path, 10, model, tokenizer, {}, {"step": 10, "evaluation": None})
    assert again == first and again.stat().st_ino == inode
    assert ckpt.read_progress(first)["evaluation"] == {"accuracy": 0.5}
    assert _leftovers(ckpt.checkpoints_dir(tmp_path)) == []
