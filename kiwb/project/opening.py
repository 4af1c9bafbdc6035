"""Opening a project folder for a command: its checked config and its store. The CLI's
subcommands (kiwb/commands.py, kiwb/labels_command.py) and scripts share these."""

from __future__ import annotations

from pathlib import Path

from kiwb.errors import KiwbError
from kiwb.project.config import ProjectConfig, load_config
from kiwb.project.database import refuse_empty_beside_work
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store


def open_project(project, *, scoring: bool = False) -> tuple[ProjectConfig, Store]:
    """Load and validate a project's config, then open its store (created on first use).

    `scoring`: the command needs two or more teachers and unlabeled texts; a config without
    them is refused before anything is written.
    """
    config = load_config(project)
    if scoring:
        config.require_scoring_inputs()
    paths = ProjectPaths(config.root)
    paths.make_layout()
    return config, Store(paths.store)


def open_existing_store(project: Path) -> Store:
    """The store of an existing project, for commands that only read or signal jobs."""
    path = ProjectPaths(project.resolve()).store
    refuse_empty_beside_work(path)  # scores or runs without a store: a store lost, said so
    if not path.is_file():
        raise KiwbError(f"{project}: no kiwb project store here; run kiwb score or kiwb train "
                        "there first (or name the project folder)")
    return Store(path)
