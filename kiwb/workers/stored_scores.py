"""Reading a finished score set back (the integration and training of every kind read their
teachers' scores here), apart from the scoring job that writes them, so a kind reading scores
imports nothing of the job that calls it."""

from __future__ import annotations

import numpy as np

from kiwb.errors import KiwbError
from kiwb.kinds import KINDS
from kiwb.project.config import ProjectConfig
from kiwb.project.store import Store
from kiwb.shell import command
from kiwb.workers.score_tasks import ScoreTask
from kiwb.workers.shard_checks import checked_shards
from kiwb.workers.shard_scoring import SCORE_FIELDS

# A token teacher's shards also hold, per word, whether it tags the word as an entity, per
# text its number of words (the other arrays hold one row per word), and per shard how many
# of its texts were read in windows.
WORD_FIELDS = ("in_span", "num_words", "windowed_texts")


def _per_task(name: str) -> bool:
    """A multi-task teacher's arrays: each head's "<task>/<array>", and its pooled features."""
    return "/" in name or name == "features"


def load_scores(config: ProjectConfig, store: Store, task: ScoreTask) -> dict[str, np.ndarray]:
    """A finished score set's arrays, concatenated in row order."""
    done = store.done_shards(task.key)
    if len(done) != task.num_shards:
        raise KiwbError(
            f"scores of teacher {task.teacher.name!r} on the {task.dataset} data are incomplete "
            f"({len(done)}/{task.num_shards} shards); run: {command('score', config.root)}"
        )
    kept = (*SCORE_FIELDS, *WORD_FIELDS, *KINDS[task.teacher.kind].jobs.stored_fields, "rows")
    parts = [{name: values for name, values in arrays.items() if name in kept or _per_task(name)}
             for arrays in checked_shards(config, store, task)]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
