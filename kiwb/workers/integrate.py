"""`kiwb integrate`: the teachers' stored scores turned into training targets, as their kind
integrates them (each kind's `integrate` seam; kiwb/kinds/seams.py)."""

from __future__ import annotations

import dataclasses

from kiwb.kinds import run_seam
from kiwb.project.config import ProjectConfig
from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.project.teacher_kinds import check_method
from kiwb.workers.score import plan_scoring


def run_integration(config: ProjectConfig, store: Store,
                    settings: IntegrationSettings) -> IntegrationRecord:
    """Integrate the unlabeled scores with `settings`, as the teachers' kind integrates;
    returns the integration as recorded."""
    tasks = plan_scoring(config, store)  # loads the data and checks the teachers once
    check_method(config, tasks[0].teacher.kind, settings.method, settings.routing,
                 dataclasses.asdict(settings))
    return run_seam(tasks[0].teacher.kind, "integrate", config, store, settings, tasks)
