"""Each kind's runtime, made once: the one registry a new kind adds a line to.

Its description needs none (every package under kiwb/kinds/ is a kind, kiwb.kinds.KINDS finds
it); what the jobs run for it does, so that the jobs reach the kind's code by plain imports a
reader and a tool can follow. Worker side: it names every kind's worker code. The project and
the workbench read the descriptions and never import this; the CLI does only inside the
commands that run a kind's work (predict, evaluate --data, labels import).
"""

from __future__ import annotations

from kiwb.kinds import TeacherKind
from kiwb.kinds.embedding.worker import EmbeddingRuntime
from kiwb.kinds.multilabel.worker import MultiLabelRuntime
from kiwb.kinds.multitask.worker import MultiTaskRuntime
from kiwb.kinds.runtime import KindRuntime
from kiwb.kinds.sequence.worker import SequenceRuntime
from kiwb.kinds.token.worker import TokenRuntime

RUNTIMES: dict[str, KindRuntime] = {runtime.kind.name: runtime for runtime in (
    SequenceRuntime(), TokenRuntime(), MultiLabelRuntime(), MultiTaskRuntime(), EmbeddingRuntime())}


def runtime_of(kind: TeacherKind) -> KindRuntime:
    """The runtime of `kind` (the description a job holds: LoadedProject.kind, or kind_named of a
    stored record's). A kind described but not registered here is refused, naming the line."""
    if kind.name not in RUNTIMES:
        raise LookupError(f"the {kind.name!r} kind has no runtime: add its runtime class to "
                          f"RUNTIMES in {__name__.replace('.', '/')}.py")
    return RUNTIMES[kind.name]
