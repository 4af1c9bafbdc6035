"""Reading score and representation sets only as they were written (kiwb.project.shard_files):
every shard is checked when it is read, and `kiwb score` checks them all before it says the
scores are up to date, setting aside the damaged ones so that it scores them again (the rest
stays cached)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kiwb.project.config import ProjectConfig
from kiwb.project.paths import ProjectPaths
from kiwb.project.shard_files import checked_arrays, problem_with, read_bytes
from kiwb.project.shards import REPRESENTATION_SUFFIX, forget_shard, record_file_check
from kiwb.project.store import Store
from kiwb.shell import command


def holds(task, shard: int) -> str:
    """What a shard holds, in words: `the scores of teacher 'a' on the eval data, rows 1-16`."""
    rows = task.shard_rows(shard)
    dataset = task.dataset
    what = "representations" if dataset.endswith(REPRESENTATION_SUFFIX) else "scores"
    return (f"the {what} of teacher {task.teacher.name!r} on the "
            f"{dataset.removesuffix(REPRESENTATION_SUFFIX)} data, rows {rows.start + 1:,}-"
            f"{rows.stop:,}")


def checked_shards(config: ProjectConfig, store: Store, task) -> list[dict[str, np.ndarray]]:
    """Each shard's arrays of a finished set, in row order, each checked against the store."""
    paths, records = ProjectPaths(config.root), store.shard_records(task.key)
    fix = f"run {command('score', config.root)}: it scores that shard again and keeps the rest"
    return [checked_arrays(paths.shard_file(task.key, shard), records[shard],
                           task.shard_rows(shard).start, holds(task, shard), fix)
            for shard in range(task.num_shards)]


def set_aside_damaged(store: Store, root, tasks: list,
                      say: Callable[[str], None]) -> int:
    """Check every finished shard of `tasks`; a damaged one is named (`say`) and no longer done,
    so this job scores it again; a shard written before kiwb recorded hashes that passes has
    its hash recorded. Returns how many were set aside."""
    import hashlib

    paths = ProjectPaths(root)
    damaged = 0
    for task in tasks:
        for shard, record in store.shard_records(task.key).items():
            path = paths.shard_file(task.key, shard)
            data = read_bytes(path)
            problem = problem_with(data, record, task.shard_rows(shard).start)
            if problem is not None:
                say(f"{path}: {holds(task, shard)} is damaged ({problem}); scoring it again")
                forget_shard(store, task.key, shard)
                damaged += 1
            elif record.sha256 is None:
                record_file_check(store, task.key, shard, row_start=task.shard_rows(shard).start,
                                  size=len(data), sha256=hashlib.sha256(data).hexdigest())
    return damaged
