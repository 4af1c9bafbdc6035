"""An integration's training targets, kept beside its record (integrations/<key>.npz): what
`kiwb integrate` made is what a training run learns from, read back by the integration's key
rather than integrated a second time. Arrays only (no pickle), written in one rename. Each
kind's training finds its candidates (the records its inputs' key names) and reads them here."""

from __future__ import annotations

import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kiwb.console import console
from kiwb.project.atomic import atomic_write_with
from kiwb.project.labels import labels_by_hash, labels_fingerprint
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import IntegrationRecord, IntegrationSettings, IntegrationSummary
from kiwb.project.store import Store


def save_targets(root: Path, key: str, arrays: dict[str, torch.Tensor]) -> None:
    """Keep an integration's targets under its key (replacing what an earlier run of the same
    integration kept: the same key holds the same targets)."""
    path = ProjectPaths(root).integration_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    values = {name: tensor.detach().cpu().numpy() for name, tensor in arrays.items()}
    atomic_write_with(path, lambda handle: np.savez(handle, **values))


def load_targets(root: Path, key: str) -> dict[str, torch.Tensor] | None:
    """The targets an integration kept, or None where it kept none (it was recorded by a kiwb
    that kept no targets, or its file was removed or damaged): the caller works them out
    again (read_or_integrate keeps them back beside the record)."""
    path = ProjectPaths(root).integration_file(key)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {name: torch.from_numpy(stored[name]) for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        console.print(f"{path}: damaged ({type(error).__name__}); working the targets out again",
                      highlight=False)
        return None


@dataclass
class MadeIntegration:
    """An integration worked out and not recorded yet: its record as the store would keep it,
    its targets, and how it lists its conflicts (the conflicts list's rows)."""

    record: IntegrationRecord
    targets: dict[str, torch.Tensor]
    list_conflicts: Callable[[Store], None]


def made(key: str, settings: IntegrationSettings, summary: IntegrationSummary,
         targets: dict[str, torch.Tensor], list_conflicts: Callable[[Store], None]
         ) -> MadeIntegration:
    """An integration of the unlabeled data, made now (see MadeIntegration)."""
    return MadeIntegration(IntegrationRecord(key=key, dataset="unlabeled", settings=settings,
                                             summary=summary, created_at=time.time()),
                           targets, list_conflicts)


def record_made(root: Path, store: Store, integration: MadeIntegration) -> IntegrationRecord:
    """Record an integration (`kiwb integrate`): its targets, then its record, then its
    conflicts; returns the record as the store keeps it."""
    key = integration.record.key
    # the targets first: a record is only ever read with its targets beside it
    save_targets(root, key, integration.targets)
    store.record_integration(key, dataset=integration.record.dataset,
                             settings=integration.record.settings.to_dict(),
                             summary=integration.record.summary.to_dict())
    integration.list_conflicts(store)
    return IntegrationRecord.from_dict(store.integration(key))


def recorded(store: Store, key: str) -> list[IntegrationRecord]:
    """The integration the store records under `key`, as a list of candidates (none, or it)."""
    found = store.integration(key)
    return [IntegrationRecord.from_dict(found)] if found is not None else []


def read_or_integrate(root: Path, candidates: Iterable[IntegrationRecord], rows: int,
                      integrate: Callable[[], MadeIntegration]
                      ) -> tuple[IntegrationRecord, dict[str, torch.Tensor]]:
    """The first candidate (a stored integration of a run's inputs) whose targets are kept
    whole for `rows` rows, with those targets. Where none is, `integrate()` works it out the
    same way, and it is not recorded: the workbench shows the integrations a user made, and
    `kiwb integrate` with the run's settings records this one under the key the run pins. A
    recorded one whose targets were lost gets them back beside it."""
    lost = None
    for record in candidates:
        targets = load_targets(root, record.key)
        if targets is not None and len(targets["targets"]) == rows:
            return record, targets
        lost = lost or record
    integration = integrate()
    if lost is not None and lost.key == integration.record.key:
        save_targets(root, lost.key, integration.targets)
        return lost, integration.targets
    return integration.record, integration.targets


def measured_alike(record: IntegrationRecord, measured_on: str | None,
                   eval_unfinished: bool = False) -> bool:
    """Whether a stored integration's eval figures (and what was made with them: the routing
    check, the class funnel) were measured on what a run measures on now (`measured_on`:
    kiwb.project.records.EvalSummary's). An eval set not scored yet gives the run no figures of
    its own, so any stored ones will do."""
    if eval_unfinished:
        return True
    evaluation = record.summary.eval
    return (evaluation.measured_on if evaluation is not None else None) == measured_on


def pinned_integration(record: IntegrationRecord | None) -> dict:
    """A run manifest's own entries for the stored integration its targets were read from: its
    key, its routing's check and class funnel, and what "auto" chose (none: a supervised run)."""
    if record is None:
        return {"routing_check": None, "class_funnel": None}
    summary = record.summary
    own = {"integration": record.key,
           "routing_check": summary.check.to_dict() if summary.check is not None else None,
           "class_funnel": summary.funnel.to_dict() if summary.funnel is not None else None}
    if summary.routing_choice is not None:  # routing = "auto": what it chose, and from what
        own["routing_choice"] = summary.routing_choice.to_dict()
    return own


def given_labels_fingerprint(store: Store, settings: IntegrationSettings) -> str | None:
    """The fingerprint of the labels given to texts (kiwb.project.labels), where the settings
    read them: what a kind's integration key holds of them."""
    return labels_fingerprint(labels_by_hash(store.connection)) if settings.labels else None
