"""What the demo builds and with which settings: the one place its sizes are chosen.

The demo project folder holds everything it needs, so it moves and works offline:

    PATH/kiwb.toml            the project (relative paths into the folders below)
    PATH/data/*.jsonl         the teachers' labeled texts, the unlabeled pool, the labeled eval
    PATH/models/base/         a tiny BERT pre-trained here by masked-language modelling
    PATH/models/teacher-*/    teachers fine-tuned from it on disjoint label subsets
    PATH/demo.json            which recipe built it (a later run reuses what it finds)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "demo.json"
RECIPE_FORMAT = 1
# Teachers with disjoint specialities, as in the paper's setting; each sees only its own rows.
TEACHERS = {
    "news": ("sports", "politics", "finance", "science"),
    "lifestyle": ("music", "cooking", "travel", "health"),
}
# The students the headless run trains (integration settings each), as the table names them;
# the last one is the paper's ablation: MUKI-Hard routed by plain confidence.
STUDENTS = {
    "Vanilla KD": {"method": "vanilla-kd"},
    "UHC": {"method": "uhc"},
    "MUKI-Hard": {"method": "muki-hard"},
    "MUKI-Soft": {"method": "muki-soft"},
    "MUKI-Hard without MC dropout": {"method": "muki-hard", "use_mc": False},
}
EXPORTED = "MUKI-Hard"


@dataclass(frozen=True)
class DemoRecipe:
    """Sizes and settings of one demo build (corpus, base, teachers, project)."""

    split_sizes: dict[str, int] = field(default_factory=lambda: {"teach": 100, "pool": 150, "eval": 50})
    mixed_share: float = 0.15
    vocab_size: int = 2000
    hidden_size: int = 64
    layers: int = 2
    heads: int = 2
    dropout: float = 0.2
    max_length: int = 48
    mlm_epochs: int = 8
    mlm_learning_rate: float = 2e-3
    mlm_batch_size: int = 64
    teacher_epochs: float = 20.0
    teacher_learning_rate: float = 2e-3
    mc_passes: int = 8
    # None: [training]'s defaults, which must learn on the demo without hand tuning.
    student_epochs: float | None = None
    student_learning_rate: float | None = None
    student_min_steps: int | None = None
    batch_size: int = 32
    eval_every: int = 50
    seed: int = 0

    def key(self) -> str:
        """A short fingerprint: a folder built by another recipe is not silently reused."""
        text = json.dumps({"format": RECIPE_FORMAT, **dataclasses.asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


FULL = DemoRecipe()
# For tests and CI smoke runs: every step runs, on a corpus and model too small to be honest.
QUICK = DemoRecipe(
    split_sizes={"teach": 30, "pool": 30, "eval": 12}, vocab_size=600, hidden_size=32,
    mlm_epochs=2, teacher_epochs=10.0, teacher_learning_rate=5e-3, mc_passes=4,
    student_epochs=4.0, student_learning_rate=5e-3, student_min_steps=0, eval_every=10,
)


@dataclass(frozen=True)
class DemoPaths:
    """Where the demo's parts live inside its project folder."""

    root: Path

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    @property
    def data(self) -> Path:
        return self.root / "data"

    def split(self, name: str) -> Path:
        return self.data / f"{name}.jsonl"

    @property
    def base(self) -> Path:
        return self.root / "models" / "base"

    def teacher(self, name: str) -> Path:
        return self.root / "models" / f"teacher-{name}"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()
