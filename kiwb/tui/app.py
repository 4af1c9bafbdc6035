"""The workbench application: themes, global keys, and the main screen. Nothing else."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.theme import Theme

from kiwb.tui import themes
from kiwb.tui.screens.help import HelpScreen
from kiwb.tui.screens.workbench import PANES, WorkbenchScreen


class WorkbenchApp(App):
    """`kiwb ui DIR`: the Knowledge Integration WorkBench on one project folder."""

    TITLE = "kiwb"
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("f1", "help", "Keys", show=False)]

    def __init__(self, project: Path, *, theme: str | None = None, pane: str | None = None,
                 theme_folders: list[Path] | None = None):
        super().__init__()
        self.project = Path(project).resolve()
        self.requested_theme, self.initial_pane = theme, pane
        self.theme_folders = theme_folders if theme_folders is not None else [
            themes.package_themes_folder(), themes.user_themes_folder()]
        self.theme_problems: list[str] = []
        self._load_themes()

    def _load_themes(self) -> None:
        loaded = themes.load_themes(self.theme_folders)
        for theme in loaded.themes:
            self.register_theme(theme)
        self.theme_problems = loaded.problems
        wanted = self.requested_theme or (themes.ANSI_THEME if themes.few_colours(
            self.console.color_system) else themes.DEFAULT_THEME)
        chosen = wanted if wanted in self.available_themes else themes.DEFAULT_THEME
        if chosen not in self.available_themes:
            chosen = themes.FALLBACK_THEME
        if self.requested_theme and self.requested_theme != chosen:
            known = ", ".join(sorted(n for n in self.available_themes if n.startswith("kiwb")))
            self.theme_problems.append(f"no theme {self.requested_theme!r}; using {chosen} "
                                       f"(kiwb themes: {known}; ctrl+p → theme lists all)")
        self.theme = chosen

    def get_theme_variable_defaults(self) -> dict[str, str]:
        theme: Theme = self.current_theme
        return themes.plot_variable_defaults(theme)

    def on_mount(self) -> None:
        self.push_screen(WorkbenchScreen(self.project, self.initial_pane))
        for problem in self.theme_problems:
            self.notify(problem, title="Theme file skipped", severity="warning", timeout=10)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(PANES))
