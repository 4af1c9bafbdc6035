"""`kiwb predict`: a quick look at what a trained or exported student says."""

from __future__ import annotations

from pathlib import Path

from kiwb.errors import KiwbError


def chosen_run(root: Path) -> str:
    """The newest run of a project (kiwb.project.run_folder.newest_run), said on stderr: for
    kiwb predict, evaluate and export given no --run."""
    from kiwb.console import console
    from kiwb.project.run_folder import newest_run

    run, line = newest_run(root)
    console.print(line, highlight=False, markup=False, soft_wrap=True)
    return run


def resolve_model_folder(target: Path, run: str | None) -> Path:
    """An exported or checkpoint folder as is; a project folder becomes its run's best checkpoint."""
    if (target / "config.json").is_file():
        return target
    if (target / "kiwb.toml").is_file():
        from kiwb.workers.export import choose_checkpoint

        if run is None:
            run = chosen_run(target)
        return choose_checkpoint(target, run)
    raise KiwbError(f"{target}: neither a model folder (config.json) nor a kiwb project (kiwb.toml)")


def folder_kind(folder: Path) -> str:
    """The kind of a model folder, from its config.json (kiwb.kinds)."""
    import json

    from kiwb.kinds import DEFAULT_KIND, kind_of_checkpoint

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    found = kind_of_checkpoint(config)
    return found[0].name if found is not None else DEFAULT_KIND
