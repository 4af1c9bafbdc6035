"""`kiwb predict`: a quick look at what a trained or exported student says."""

from __future__ import annotations

from pathlib import Path

from kiwb.errors import KiwbError
from kiwb.shell import command


def resolve_model_folder(target: Path, run: str | None) -> Path:
    """An exported or checkpoint folder as is; a project folder becomes its run's best checkpoint."""
    if (target / "config.json").is_file():
        return target
    if (target / "kiwb.toml").is_file():
        from kiwb.project.paths import ProjectPaths
        from kiwb.workers.export import choose_checkpoint

        if run is None:
            runs = sorted((p for p in ProjectPaths(target).runs.glob("*") if p.is_dir()),
                          key=lambda p: p.stat().st_mtime)
            if not runs:
                raise KiwbError(f"{target}: no trained runs yet; run: {command('train', target)}")
            run = runs[-1].name
            from kiwb.console import console  # stderr: the answers on stdout stay as they are

            console.print(f"Run {run}, the newest of {len(runs)} (--run NAME for another)",
                          highlight=False, markup=False, soft_wrap=True)
        return choose_checkpoint(target, run)
    raise KiwbError(f"{target}: neither a model folder (config.json) nor a kiwb project (kiwb.toml)")


def folder_kind(folder: Path) -> str:
    """The kind of a model folder, from its config.json (kiwb.kinds)."""
    import json

    from kiwb.kinds import DEFAULT_KIND, kind_of_checkpoint

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    found = kind_of_checkpoint(config)
    return found[0].name if found is not None else DEFAULT_KIND
