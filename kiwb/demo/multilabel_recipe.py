"""What the multi-label demo (`kiwb demo --kind multi-label`) builds and with which settings:
the one place its sizes are chosen. Its folder is laid out as the text demo's
(kiwb.demo.recipe):

    PATH/kiwb.toml            the multi-label project (label_column = "labels": a list per text)
    PATH/data/*.jsonl         texts of one or two topics with their topics as labels
    PATH/models/base/         a tiny BERT pre-trained here by masked-language modelling
    PATH/models/teacher-*/    sigmoid classifiers fine-tuned from it on label sets sharing two
    PATH/demo.json            which recipe built it (a later run reuses what it finds)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from kiwb.demo.recipe import DemoRecipe

RECIPE_FORMAT = 1
# The text demo's eight topics over two teachers that share two (health, science): each
# teacher says yes or no to its five, and the student to all eight.
TEACHERS = {
    "civic": ("finance", "health", "politics", "science", "sports"),
    "leisure": ("cooking", "health", "music", "science", "travel"),
}
# The students the headless run trains, as the table names them: ANT's rule with and without
# its label-dependency transfer, its baselines and MUKI decided per label.
STUDENTS = {
    "Vote (owners' majority)": {"method": "vote"},
    "Mean (owners' mean)": {"method": "mean"},
    "ANT": {"method": "ant"},
    "ANT with transfer": {"method": "ant", "transfer": True},
    "MUKI-Hard": {"method": "muki-hard"},
    "MUKI-Soft": {"method": "muki-soft"},
    "MUKI-Hard without MC dropout": {"method": "muki-hard", "use_mc": False},
}
EXPORTED = "MUKI-Hard"


@dataclass(frozen=True)
class MultiLabelRecipe(DemoRecipe):
    """Sizes and settings of one multi-label demo build: the text demo's, with the share of
    texts that join two topics' sentences (and carry both labels)."""

    two_topic_share: float = 0.5

    def key(self) -> str:
        """A short fingerprint: a folder built by another recipe is not silently reused."""
        settings = {"kind": "multi-label", "format": RECIPE_FORMAT, **dataclasses.asdict(self)}
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


FULL = MultiLabelRecipe()
# For tests and CI smoke runs: every step runs, on a corpus and model too small to be honest.
QUICK = MultiLabelRecipe(
    split_sizes={"teach": 30, "pool": 30, "eval": 12}, vocab_size=600, hidden_size=32,
    mlm_epochs=2, teacher_epochs=10.0, teacher_learning_rate=5e-3, mc_passes=4,
    student_epochs=4.0, student_learning_rate=5e-3, student_min_steps=0, eval_every=10,
)
