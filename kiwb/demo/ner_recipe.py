"""What the NER demo (`kiwb demo --kind token`) builds and with which settings: the one place
its sizes are chosen. Its folder is laid out as the text demo's (kiwb.demo.recipe):

    PATH/kiwb.toml            the token project (tokens_column / tags_column)
    PATH/data/*.jsonl         tagged sentences for the teachers, the pool's words, tagged eval
    PATH/models/base/         a tiny BERT pre-trained here by masked-language modelling
    PATH/models/teacher-*/    NER taggers fine-tuned from it on disjoint entity types
    PATH/demo.json            which recipe built it (a later run reuses what it finds)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from kiwb.demo.recipe import DemoRecipe

RECIPE_FORMAT = 1
# The sorted types halved between two teachers, as the paper splits CoNLL's. Each teacher is
# trained on every teaching sentence with the other half's words tagged O.
TEACHERS = {
    "loc-misc": ("LOC", "MISC"),
    "org-per": ("ORG", "PER"),
}


@dataclass(frozen=True)
class NerRecipe(DemoRecipe):
    """Sizes and settings of one NER demo build: the text demo's, with its own corpus sizes
    and teacher epochs, and the NER corpus's shares of ambiguous and unseen names."""

    split_sizes: dict[str, int] = field(
        default_factory=lambda: {"teach": 800, "pool": 1200, "eval": 400})
    ambiguous_share: float = 0.25
    unseen_share: float = 0.3  # of each name list, kept out of the teachers' sentences
    teacher_epochs: float = 10.0

    def key(self) -> str:
        """A short fingerprint: a folder built by another recipe is not silently reused."""
        settings = {"kind": "ner", "format": RECIPE_FORMAT, **dataclasses.asdict(self)}
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


FULL = NerRecipe()
# For tests and CI smoke runs: every step runs, on a third of the corpus with shorter
# pre-training and training (half a minute on 2 cores); MUKI-Hard still beats each teacher
# alone by about 15 points of entity F1, which tests/test_demo_ner.py checks.
QUICK = NerRecipe(
    split_sizes={"teach": 400, "pool": 400, "eval": 100}, vocab_size=1000, mlm_epochs=4,
    mc_passes=4, student_epochs=12.0, student_learning_rate=3e-3, student_min_steps=0,
    eval_every=25,
)
