"""What the multi-task demo (`kiwb demo --kind multi-task`) builds and with which settings: the
one place its sizes are chosen. Its folder is laid out as the text demo's (kiwb.demo.recipe):

    PATH/kiwb.toml            the multi-task project: tasks `topic` and `tags`
    PATH/data/*.jsonl         texts of one topic, some mentioning a second: topic and tags
    PATH/models/base/         a tiny BERT pre-trained here by masked-language modelling
    PATH/models/teacher-*/    two topic classifiers (halves of the topics), one tagger
    PATH/demo.json            which recipe built it (a later run reuses what it finds)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from kiwb.demo.recipe import TEACHERS as TOPIC_HALVES
from kiwb.demo.recipe import DemoRecipe

RECIPE_FORMAT = 1
TOPICS = tuple(topic for half in TOPIC_HALVES.values() for topic in half)
# Two tasks over the text demo's eight topics: `topic` (single-label, the text's main topic)
# answered by the text demo's two teachers, each knowing half; `tags` (multi-label: every
# topic a text mentions) answered by one tagger that knows all eight.
TASKS = {"topic": "single-label", "tags": "multi-label"}
TEACHERS = {**{name: ("topic", labels) for name, labels in TOPIC_HALVES.items()},
            "tagger": ("tags", TOPICS)}
# The students the headless run trains: VENUS' feature loss on and off, and its mean
# consensus (the supervised reference is the benchmark's: the demo's pool has no labels).
STUDENTS = {  # named runs: the feature loss's weight is not in a run's default name
    "multi-head, MUKI + feature loss": {"method": "muki-hard", "run": "muki-hard-features"},
    "multi-head, MUKI, heads only": {"method": "muki-hard", "feature_weight": 0.0,
                                     "run": "muki-hard-heads"},
    "multi-head, mean consensus + feature loss": {"method": "mean", "run": "mean-features"},
}
EXPORTED = "multi-head, MUKI + feature loss"


@dataclass(frozen=True)
class MultiTaskRecipe(DemoRecipe):
    """Sizes and settings of one multi-task demo build: the text demo's, with the share of
    texts that mention a second topic (a second tag, the same topic)."""

    mention_share: float = 0.4
    mention_words: int = 4

    def key(self) -> str:
        """A short fingerprint: a folder built by another recipe is not silently reused."""
        settings = {"kind": "multi-task", "format": RECIPE_FORMAT, **dataclasses.asdict(self)}
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


FULL = MultiTaskRecipe()
# For tests and CI smoke runs: every step runs, on a corpus and model too small to be honest.
QUICK = MultiTaskRecipe(
    split_sizes={"teach": 30, "pool": 30, "eval": 12}, vocab_size=600, hidden_size=32,
    mlm_epochs=2, teacher_epochs=10.0, teacher_learning_rate=5e-3, mc_passes=4,
    student_epochs=4.0, student_learning_rate=5e-3, student_min_steps=0, eval_every=10,
)
