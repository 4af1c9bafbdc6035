"""`kiwb train --init-from-merge RUN`: a student that starts from a merge run's weights (its
union head included) instead of its base with a fresh head."""

from __future__ import annotations

from kiwb.errors import KiwbError
from kiwb.project.paths import ProjectPaths
from kiwb.shell import command
from kiwb.workers import checkpoints as ckpt


def start_from_merge(config, run: str, data) -> None:
    """Point the run's training data at the merge run's checkpoint, after checking that it is a
    merge of this project's union; the run's manifest records it (a changed merge is then a
    changed run, which --resume refuses)."""
    from kiwb.workers.export import choose_checkpoint

    run_dir = ProjectPaths(config.root).run_dir(run)
    manifest = ckpt.read_manifest(run_dir) or {}
    folder = choose_checkpoint(config.root, run, "best")
    if "merge" not in manifest:
        raise KiwbError(f"run {run!r} is a trained run, not a merge: --init-from-merge starts a "
                        f"student from merged weights; make them with {command('merge', config.root)}")
    if list(manifest.get("labels") or []) != list(data.labels):
        raise KiwbError(f"merge run {run!r} predicts {', '.join(manifest.get('labels') or [])}, "
                        f"not this project's union labels ({', '.join(data.labels)}); merge the "
                        f"project's teachers again: {command('merge', config.root, '--force', '--run', run)}")
    from kiwb.project.fingerprint import checkpoint_hash

    merge = manifest["merge"]
    data.init_from = folder
    data.manifest["init_from_merge"] = {
        "run": run, "checkpoint": folder.name, "method": merge.get("method"),
        "lambda": merge.get("lambda"), "top_k": merge.get("top_k"),
        "weights": checkpoint_hash(folder)}  # a merge replaced with --force is another start
