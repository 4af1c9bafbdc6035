"""Where things live inside a project folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProjectPaths:
    """The fixed layout of a kiwb project folder."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "kiwb.toml"

    @property
    def store(self) -> Path:
        return self.root / "store.sqlite"

    @property
    def scores(self) -> Path:
        return self.root / "scores"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    @property
    def backups(self) -> Path:
        """Copies of the store kiwb keeps (kiwb.project.backups)."""
        return self.root / "backups"

    @property
    def integrations(self) -> Path:
        """Each recorded integration's training targets (kiwb.workers.integration_targets)."""
        return self.root / "integrations"

    def integration_file(self, key: str) -> Path:
        return self.integrations / f"{key}.npz"

    def score_dir(self, score_key: str) -> Path:
        return self.scores / score_key

    def shard_file(self, score_key: str, shard: int) -> Path:
        return self.score_dir(score_key) / f"shard-{shard:06d}.npz"

    def run_dir(self, run: str) -> Path:
        return self.runs / run

    def make_layout(self) -> None:
        """Create the project's sub-folders (idempotent)."""
        for folder in (self.scores, self.runs, self.logs, self.exports):
            folder.mkdir(parents=True, exist_ok=True)
