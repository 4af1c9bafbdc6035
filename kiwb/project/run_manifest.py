"""A run's manifest (manifest.json in its folder): what pins a trained or merged run's inputs.
A resume compares it (kiwb.project.resume_checks), export, the model card and the workbench
read it. Every kind builds its runs' manifests with `RunManifest`, so the entries they share
are written in one place, under one name each. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kiwb import __version__


@dataclass(frozen=True, kw_only=True)
class RunManifest:
    """The inputs of one run. Each entry a resume compares is named in RESUME_CHECKS."""

    kind: str  # the teachers' kind (kiwb.kinds), which reads the run back
    # per teacher: its name, its content hash, and what the kind knows of it (labels, width,
    # pooling, tasks)
    teachers: list[dict[str, Any]]
    labels: list[str]  # the student's outputs, in order (none for sentence encoders)
    method: dict[str, Any]  # the integration settings (IntegrationSettings.pinned())
    student: str | None  # the base checkpoint the student started from
    data: Any = None  # the unlabeled texts' fingerprint
    labeled_data: Any = None  # [data.labeled]'s texts and labels, fingerprinted
    given_labels: Any = None  # the labels given in the workbench or by kiwb labels import
    eval_data: Any = None  # the eval set's texts and labels, fingerprinted
    training: dict[str, Any] | None = None  # [training] as the run pins it
    # the kind's own entries: the routing's check and choice, the class funnel, [embedding],
    # the tasks, a merge's record
    own: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The manifest as manifest.json holds it (a merge run has no training nor data)."""
        values: dict[str, Any] = {"kiwb_version": __version__, "kind": self.kind,
                                  "teachers": self.teachers, "labels": self.labels,
                                  "method": self.method, "student": self.student}
        if self.training is not None:  # a trained run: every input that decides its targets
            values.update(data=self.data, labeled_data=self.labeled_data,
                          given_labels=self.given_labels, training=self.training)
        values["eval_data"] = self.eval_data
        shared = set(values) & set(self.own)
        if shared:  # a kind's entry must not stand in for a shared one
            raise ValueError(f"a run manifest's own entries {sorted(shared)} are shared ones")
        return {**values, **self.own}


def routed_by(manifest: dict[str, Any]) -> str | None:
    """The routing a run's targets were routed by: what "auto" chose, else the settings'."""
    choice = manifest.get("routing_choice")
    return choice["routing"] if choice else (manifest.get("method") or {}).get("routing")
