"""`kiwb integrate`: the teachers' stored scores turned into training targets, as their kind
integrates them (each kind's runtime, kiwb.kinds.runtime.KindRuntime.integrate)."""

from __future__ import annotations

import dataclasses

from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.project.teacher_kinds import LoadedProject, check_method
from kiwb.workers.kind_runtimes import runtime_of
from kiwb.workers.score import plan_scoring


def run_integration(project: LoadedProject, store: Store,
                    settings: IntegrationSettings) -> IntegrationRecord:
    """Integrate the unlabeled scores with `settings`, as the teachers' kind integrates;
    returns the integration as recorded."""
    config = project.config
    tasks = plan_scoring(config, store, kind=project.kind)  # the data and teachers, read once
    check_method(config, project.kind, settings.method, settings.routing,
                 dataclasses.asdict(settings))
    return runtime_of(project.kind).integrate(config, store, settings, tasks)
