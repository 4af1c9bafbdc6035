"""What the embedding demo (`kiwb demo --kind embedding`) builds and with which settings: the
one place its sizes are chosen. Its folder is laid out as the text demo's (kiwb.demo.recipe):

    PATH/kiwb.toml            the embedding project ([embedding]): two sentence encoders
    PATH/data/*.jsonl         the text demo's texts; the eval set keeps each text's topic
    PATH/models/base/         a tiny BERT pre-trained here by masked-language modelling
    PATH/models/teacher-*/    two sentence encoders (mean pooling), each tuned on half the topics
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
# Each encoder is the text demo's teacher of half the topics with its head dropped: it places
# its own topics' texts apart from each other, the other half's less well. The student should
# place all eight; the eval set's topics measure it (kNN accuracy), never train it.
TEACHERS = TOPIC_HALVES
# The students the headless run trains: each pair weighting.
STUDENTS = {
    "MC-weighted pairs": {"method": "mc", "run": "mc"},
    "maskout": {"method": "maskout", "run": "maskout"},
    "equal weights": {"method": "equal", "run": "equal"},
}
EXPORTED = "MC-weighted pairs"


@dataclass(frozen=True)
class EmbeddingRecipe(DemoRecipe):
    """The text demo's sizes and settings, for sentence encoders."""

    def key(self) -> str:
        """A short fingerprint: a folder built by another recipe is not silently reused."""
        settings = {"kind": "embedding", "format": RECIPE_FORMAT, **dataclasses.asdict(self)}
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


FULL = EmbeddingRecipe()
# For tests and CI smoke runs: every step runs, on a corpus and model too small to be honest.
QUICK = EmbeddingRecipe(
    split_sizes={"teach": 30, "pool": 30, "eval": 12}, vocab_size=600, hidden_size=32,
    mlm_epochs=2, teacher_epochs=10.0, teacher_learning_rate=5e-3, mc_passes=4,
    student_epochs=4.0, student_learning_rate=5e-3, student_min_steps=0, eval_every=10,
)
