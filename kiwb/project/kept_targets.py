"""The targets kept beside the integrations (integrations/KEY.npz), and which of them no run
needs: what `kiwb store prune` removes. The store keeps every integration's record; a file
removed here is only worked out again, the same, by the next run that reads its integration
(kiwb.workers.integration_targets.read_or_integrate). Torch-free: files and the store only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kiwb.project.paths import ProjectPaths
from kiwb.project.resume_checks import read_manifest
from kiwb.project.store import Store

NEWEST = "the newest integration"


@dataclass(frozen=True)
class KeptTargets:
    """One file in integrations/ and why it stays (None: nothing needs it)."""

    path: Path
    size: int
    kept_for: str | None


def kept_targets(root: Path, store: Store) -> list[KeptTargets]:
    """Every file in the project's integrations/ folder, by name: kept for the newest
    integration (what the workbench shows and a new run most likely reads) and for those a
    run's manifest pins (a resume reads them); not kept for older integrations, for keys the
    store has no record of, and for what a killed write left."""
    folder = ProjectPaths(root).integrations
    if not folder.is_dir():
        return []
    newest = store.connection.execute(
        "SELECT key FROM integrations ORDER BY created_at DESC LIMIT 1").fetchone()
    needed = {newest["key"]: NEWEST} if newest is not None else {}
    for run, key in _pinned_by_runs(root):
        needed.setdefault(key, f"pinned by run {run}")
    found = []
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        # (a staging file a killed write left, .KEY.npz.XXXXXXXX.tmp, is no key's)
        key = path.name.removesuffix(".npz") if path.suffix == ".npz" else None
        found.append(KeptTargets(path, path.stat().st_size, needed.get(key)))
    return found


def _pinned_by_runs(root: Path) -> list[tuple[str, str]]:
    """(run, integration key) of every run whose manifest pins an integration."""
    runs = ProjectPaths(root).runs
    pinned = []
    for folder in sorted(runs.iterdir()) if runs.is_dir() else ():
        try:
            manifest = read_manifest(folder) if folder.is_dir() else None
        except ValueError:  # a manifest a killed write left unreadable pins nothing readable
            manifest = None
        key = (manifest or {}).get("integration")
        if isinstance(key, str):
            pinned.append((folder.name, key))
    return pinned


def remove(unneeded: list[KeptTargets]) -> None:
    """Remove the files nothing needs (kept_for None)."""
    for item in unneeded:
        item.path.unlink(missing_ok=True)
