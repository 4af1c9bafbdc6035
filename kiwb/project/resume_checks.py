"""What must match for a run to be resumed: its manifest's recorded inputs against the ones it
would be given now. Torch-free, so a resume with other settings is refused before its job is
recorded (kiwb.project.job_checks), and again by the worker with everything it computes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kiwb.errors import KiwbError

MANIFEST_FILE = "manifest.json"


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / MANIFEST_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


# Manifest entries that must match for a run to be resumed, and how to explain a mismatch.
RESUME_CHECKS = {
    "teachers": "the teachers changed (names or content hashes)",
    "labels": "the union label set or its order changed",
    "method": "the integration method or its settings changed",
    "data": "the unlabeled data changed",
    "labeled_data": "the [data.labeled] texts or their labels changed",
    "given_labels": "the labels given to texts changed (kiwb labels list shows them)",
    "eval_data": "the labeled evaluation data was added, removed or changed",
    "student": "the student base changed",
    "training": "the training settings changed",
    "init_from_merge": "the merge run it started from changed (or it started from the base)",
    "embedding": "the [embedding] settings changed (pooling, direct_weight, coverage)",
    # the score sets the targets came from: another [scoring] setting (dropout, K, seed)
    # rescored a teacher, so the targets would change under the run
    "scores": "the teachers' scores changed (another [scoring] setting rescored a teacher)",
    # the stored integration the targets were read from (its key holds every input of it)
    "integration": "the integration its targets come from changed (kiwb integrate's key)",
}
# Keys kiwb began to pin later: a run recorded before one existed is not held to it.
PINNED_SINCE = {"scores", "integration"}


def check_resumable(run_dir: Path, manifest: dict[str, Any],
                    keys: tuple[str, ...] | None = None) -> None:
    """Refuse to resume a run whose recorded inputs differ from the current ones (`keys`: only
    these entries, those known before the job runs)."""
    recorded = read_manifest(run_dir)
    if recorded is None:
        raise KiwbError(f"{run_dir}: no manifest.json, so this run cannot be resumed; start it afresh")
    for key, reason in RESUME_CHECKS.items():
        if keys is not None and key not in keys:
            continue
        if key in PINNED_SINCE and key not in recorded:
            continue
        if _comparable(key, recorded.get(key)) != _comparable(key, manifest.get(key)):
            raise KiwbError(
                f"cannot resume run {run_dir.name!r}: {reason} since it started"
                f"{_changed_settings(recorded.get(key), manifest.get(key))}; "
                f"start a new run with --run NEW_NAME (or delete {run_dir})"
            )


def _comparable(key: str, value: Any) -> Any:
    """The integration settings as the store's records hold them (a manifest is a file, which
    the store's migrations do not rewrite), so an older run still resumes when nothing really
    changed."""
    if key == "method" and isinstance(value, dict):
        from kiwb.project.config_schema import REMOVED_KEYS
        from kiwb.project.records import IntegrationSettings
        from kiwb.project.schema import completed_settings

        # a run trained with a setting kiwb has since removed, switched on, cannot go on without it
        removed = {name: value[name] for name in REMOVED_KEYS["integration"] if value.get(name)}
        return {**IntegrationSettings.from_dict(completed_settings(value)).to_dict(), **removed}
    return value


def _changed_settings(before: Any, now: Any) -> str:
    """` (name: old -> new, ...)` for settings dicts, so a user can put them back; a default
    added by a later kiwb shows as unset before."""
    if not isinstance(before, dict) or not isinstance(now, dict):
        return ""
    changed = [f"{name}: {before.get(name, 'unset')!r} -> {now.get(name, 'unset')!r}"
               for name in sorted(set(before) | set(now)) if before.get(name) != now.get(name)]
    return f" ({', '.join(changed)})" if changed else ""
