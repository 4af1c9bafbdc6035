"""Every message the workbench's background threads post; handlers own the UI state.

Threads never touch widgets: they read, then `post_message` one of these (the only
thread-safe call), and an `on_...` handler on the UI thread applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from kiwb.project.config import ProjectConfig
from kiwb.project.instances import Instance, InstanceFilter
from kiwb.project.queries import LabelProgress, RunFolder, StoreChanges, TeacherView
from kiwb.project.records import IntegrationSummary
from kiwb.tui.inspect import DatasetSummary, TeacherSummary


@dataclass
class ConfigLoaded(Message):
    """kiwb.toml was read (at start or after it changed): the config, or why it is unusable."""

    config: ProjectConfig | None
    error: str | None = None


@dataclass
class TeachersInspected(Message):
    summaries: list[TeacherSummary]


@dataclass
class DatasetsInspected(Message):
    summaries: list[DatasetSummary]


@dataclass
class StoreChanged(Message):
    """One poll of the store: new events since the last poll, current jobs and score sets."""

    changes: StoreChanges


@dataclass
class ConflictsPage(Message):
    """A page of texts for the conflicts list; stale requests are dropped by `request`."""

    request: int
    instances: list[Instance]
    append: bool
    exhausted: bool


@dataclass
class ConflictsCounted(Message):
    request: int
    total: int


@dataclass
class ConflictScores(Message):
    """Each teacher's stored scores of one text, for the detail view."""

    instance: Instance
    views: list[TeacherView]


@dataclass
class LabelSaved(Message):
    """A label decision was committed to the store."""

    text_hash: str
    label: str | None  # None: none of these labels


@dataclass
class LabelFailed(Message):
    """A label decision could not be stored (the reason comes as an ActionFailed)."""

    text_hash: str


@dataclass
class LabelUndone(Message):
    """A decision was taken back: the text has its label from before again, or none."""

    text_hash: str
    labeled: bool
    label: str | None


@dataclass
class LabelsRead(Message):
    """What the labels are doing for the shown integration (the Conflicts header)."""

    integration: str
    progress: LabelProgress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LabelsRead)


@dataclass
class ConflictsExported(Message):
    path: str
    rows: int
    filters: InstanceFilter


@dataclass
class JobLog(Message):
    """The last lines of a job's log file."""

    job_id: int
    lines: list[str]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, JobLog)


@dataclass
class RunsFound(Message):
    """Training runs with checkpoints, for the Export pane."""

    runs: list[RunFolder]


@dataclass
class IntegrationDone(Message):
    summary: IntegrationSummary


@dataclass
class ActionDone(Message):
    """A background action finished; `message` tells the user what happened next."""

    message: str
    refresh: bool = True


@dataclass
class ActionFailed(Message):
    """A background action failed; `message` says what went wrong and what to do."""

    action: str
    message: str


@dataclass
class FormAccepted(Message):
    """A form's action succeeded in its thread; the form closes with `value`."""

    value: Any
