"""A damaged store (issue 59): named in one line with how to recover, never a traceback; kiwb
keeps a copy after each job and puts it back; an empty store beside the project's work is
refused rather than taken for a new project."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_kiwb, write_project
from test_bad_input import assert_refused
from tiny import make_texts, write_jsonl


@pytest.fixture(scope="module")
def worked(tmp_path_factory, teachers_dir) -> Path:
    """A project scored and integrated twice, then integrated with another method: 4 jobs."""
    root = tmp_path_factory.mktemp("store")
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(48, seed=71)])
    project = write_project(root / "proj", {"a": teachers_dir / "teacher_a",
                                            "b": teachers_dir / "teacher_b"}, root / "pool.jsonl")
    run_kiwb("score", project, cwd=root)
    for method in ("muki-hard", "muki-soft", "uhc"):
        run_kiwb("integrate", project, "--method", method, cwd=root)
    return project


def copy_of(worked: Path, tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(worked, project)
    return project


def test_a_copy_is_kept_after_each_job_and_only_the_newest_three(worked):
    copies = sorted((worked / "backups").glob("store-*.sqlite"))
    assert len(copies) == 3  # four jobs: the first copy was removed
    assert [path.name.split("-job-")[1] for path in copies] == [
        "2--integrate.sqlite", "3--integrate.sqlite", "4--integrate.sqlite"]
    for path in copies:  # each a whole store on its own, that SQLite finds nothing wrong in
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert not Path(f"{path}-wal").exists()


def damage(store: Path) -> None:
    """Garbage over pages 2 to 6 (SQLite's first page, the header, kept)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    data = bytearray(store.read_bytes())
    for index in range(4096, min(len(data), 6 * 4096)):
        data[index] = (index * 7) % 256
    store.write_bytes(bytes(data))


def test_a_damaged_store_is_named_and_the_copy_kept_after_the_last_job_put_back(worked, tmp_path):
    project = copy_of(worked, tmp_path)
    damage(project / "store.sqlite")
    # the workbench too: named before its screen opens, not a traceback from the first pane
    for command in (("jobs", project), ("integrate", project), ("labels", "list", project),
                    ("ui", project)):
        assert_refused(run_kiwb(*command, cwd=tmp_path, check=False), "the project store",
                       f"kiwb store restore {project}")
    assert_refused(run_kiwb("store", "check", project, cwd=tmp_path, check=False), "damaged")
    said = run_kiwb("store", "restore", project, cwd=tmp_path).stdout
    assert "job-4--integrate" in said and "store.sqlite.damaged-" in said
    assert list(project.glob("store.sqlite.damaged-*"))  # the damaged store kept aside
    assert "ok" in run_kiwb("store", "check", project, cwd=tmp_path).stdout
    jobs = run_kiwb("jobs", project, cwd=tmp_path).stdout
    assert jobs.count("finished") >= 4
    run_kiwb("integrate", project, cwd=tmp_path)


@pytest.mark.parametrize("state", ["empty", "missing"])
def test_an_empty_store_beside_the_projects_work_is_refused(worked, tmp_path, state):
    project = copy_of(worked, tmp_path)
    store = project / "store.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    if state == "empty":
        store.write_bytes(b"")
    else:
        store.unlink()
    for command in (("jobs", project), ("score", project), ("ui", project)):
        assert_refused(run_kiwb(*command, cwd=tmp_path, check=False),
                       f"is {state} while scores/ hold this project's work",
                       "kiwb store restore")
    assert (store.exists() and store.stat().st_size == 0) == (state == "empty")
    run_kiwb("store", "restore", project, cwd=tmp_path)
    run_kiwb("integrate", project, cwd=tmp_path)
