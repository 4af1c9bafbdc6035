"""What every pane shares: the project it shows, and the hooks the screen feeds it through."""

from __future__ import annotations

from pathlib import Path

from textual.containers import Vertical
from textual.widget import Widget

from kiwb.kinds import TeacherKind, declared_kind, kind_named
from kiwb.project.config import ProjectConfig
from kiwb.project.environment import Problem
from kiwb.project.queries import StoreChanges


class Pane(Vertical):
    """One tab of the workbench. The screen hands every pane each config and store change;
    a pane keeps what it needs and redraws."""

    TITLE = ""
    DEFAULT_CSS = """
    Pane { padding: 0 1; }
    Pane .note { color: $text-muted; height: auto; }
    Pane .problem { color: $error; height: auto; }
    Pane .heading { text-style: bold; height: 1; margin-top: 1; }
    """

    def __init__(self, root: Path, **kwargs):
        super().__init__(**kwargs)
        self.root = root
        self.config: ProjectConfig | None = None
        self.config_error: str | None = None
        self.config_problems: list[Problem] = []

    def show_config(self, config: ProjectConfig | None, error: str | None,
                    problems: list[Problem] = ()) -> None:
        """kiwb.toml as read: the config (None with the `error` that made it unusable) and
        what it names that is missing on disk."""
        self.config, self.config_error, self.config_problems = config, error, list(problems)

    def require_config(self) -> ProjectConfig | None:
        """The config to start a job with, or None after saying why it cannot run."""
        if self.config is None:
            self.notify(self.config_error or "no usable kiwb.toml", severity="error")
        elif self.config_problems:
            self.notify(self.config_problems[0].message, severity="error", markup=False)
            return None
        return self.config

    def teachers_kind(self, summary) -> TeacherKind:
        """The teachers' kind: the one kiwb.toml declares (known before anything ran), else
        the kind of `summary`, the integration shown (None: the default kind)."""
        declared = declared_kind(self.config) if self.config is not None else None
        return declared or kind_named(summary.teachers_kind if summary is not None else None)

    def apply_changes(self, changes: StoreChanges) -> None:
        """New events and the current jobs, score sets and integration (called each poll)."""

    def main_widget(self) -> Widget | None:
        """The widget that takes the focus when the pane is shown."""
        return None

    def shown(self) -> None:
        """The pane became the visible tab."""
        widget = self.main_widget()
        if widget is not None:
            widget.focus()

    def hidden(self) -> None:
        """Another pane became the visible tab."""

    def request_refresh(self) -> None:
        """Ask the screen to read the project again now, after an action changed it."""
        refresh = getattr(self.screen, "refresh_now", None)
        if refresh is not None:
            refresh()
