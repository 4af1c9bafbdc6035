"""Each kind's runtime, made once: where a job goes from a kind's description to its worker code.

Worker side (it imports every kind's torch code): the CLI, the project and the workbench read
the descriptions in kiwb.kinds and never import this. A new kind adds its runtime here, as it
adds its description to kiwb.kinds.KINDS.
"""

from __future__ import annotations

from kiwb.kinds.base import TeacherKind
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
    stored record's)."""
    return RUNTIMES[kind.name]
