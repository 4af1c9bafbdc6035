"""The one place the workbench starts and stops work: the same functions the CLI calls.

Scoring, integration, training and export are background jobs (`kiwb.launch`), so they
outlive the workbench, show in `kiwb jobs` and keep torch out of this process.
"""

from __future__ import annotations

from pathlib import Path

from kiwb.project.job_specs import JobSpec


def launch(root: Path, spec: JobSpec) -> int:
    """Start a detached job doing what `spec` says; returns its id."""
    from kiwb.launch import launch_job

    return launch_job(root, spec)


def cancel(root: Path, job_id: int) -> str:
    """Ask a job to stop after its batch (a second time: at once); says what happened."""
    from kiwb.launch import cancel_job
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    with Store(ProjectPaths(Path(root)).store) as store:
        return cancel_job(store, job_id)
