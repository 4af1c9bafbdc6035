"""Independent processes split one scoring job by claiming different shards in the store."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from cli_helpers import kiwb_env, write_project
from tiny import make_texts, write_jsonl

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store

SCORER = """
import sys, torch
from kiwb.project.opening import open_project
from kiwb.workers.quiet import quiet_libraries
from kiwb.workers.score import plan_scoring, register_tasks, run_scoring
quiet_libraries()
config, store = open_project(sys.argv[1])
tasks = plan_scoring(config, store)
register_tasks(store, tasks)
run_scoring(config, store, tasks, device=torch.device("cpu"))
"""


@pytest.mark.slow
def test_two_processes_claim_different_shards_and_score_each_text_once(tmp_path, teachers_dir):
    data = write_jsonl(tmp_path / "pool.jsonl", [{"text": r["text"]} for r in make_texts(480, seed=4)])
    project = write_project(tmp_path / "p", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
                            data, scoring="mc_passes = 8\nshard_size = 20\n")
    workers = [subprocess.Popen([sys.executable, "-c", SCORER, str(project)], env=kiwb_env(),
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for worker in workers:
        _, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr

    with Store(ProjectPaths(project).store) as store:
        shards = store.connection.execute(
            "SELECT score_key, shard, status, pid FROM score_shards").fetchall()
        sets = store.connection.execute("SELECT key, num_shards FROM score_sets").fetchall()
    # 24 shards of MC scores per teacher, and as many of its representation, kept beside them
    assert len(shards) == sum(row["num_shards"] for row in sets) == 2 * 48
    assert {row["status"] for row in shards} == {"done"}
    pids = {row["pid"] for row in shards}
    assert pids == {w.pid for w in workers}, "both processes must have scored some shards"
    for record in sets:
        files = [ProjectPaths(project).shard_file(record["key"], s) for s in range(record["num_shards"])]
        if "rows" not in np.load(files[0]).files:  # a representation set: every text once too
            assert sum(len(np.load(f)["representation"]) for f in files) == 480
            continue
        rows = np.concatenate([np.load(f)["rows"] for f in files])
        assert rows.tolist() == list(range(480))
