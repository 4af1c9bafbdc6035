"""The workbench application: themes, global keys, and the main screen. Nothing else."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from kiwb.tui import themes
from kiwb.tui.screens.help import HelpScreen
from kiwb.tui.screens.workbench import PANES, WorkbenchScreen


class WorkbenchApp(App):
    """`kiwb ui DIR`: the Knowledge Integration WorkBench on one project folder."""

    TITLE = "kiwb"
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("f1", "help", "Keys", show=False)]

    def __init__(self, project: Path, *, theme: str | None = None, pane: str | None = None,
                 theme_folders: list[Path] | None = None, theme_memory: Path | None = None):
        """`theme` is for this session only; without it the theme last picked from the
        palette (remembered in `theme_memory`, when given) is used."""
        super().__init__()
        self.project = Path(project).resolve()
        self.requested_theme, self.initial_pane = theme, pane
        self.theme_folders = theme_folders if theme_folders is not None else [
            themes.package_themes_folder(), themes.user_themes_folder()]
        self.theme_memory = theme_memory
        self.theme_problems: list[str] = []
        self._load_themes()

    def _load_themes(self) -> None:
        loaded = themes.load_themes(self.theme_folders)
        for theme in loaded.themes:
            self.register_theme(theme)
        requested, memory_problem = self.requested_theme, None
        if requested is None and self.theme_memory is not None:
            requested, memory_problem = themes.remembered_theme(self.theme_memory)
        chosen, problem = themes.choose_theme(requested, set(self.available_themes),
                                              self.console.color_system)
        self.theme_problems = loaded.problems + [note for note in (memory_problem, problem) if note]
        self.theme = self.starting_theme = chosen
        self._theme_picked = False

    def _remember_theme(self, theme) -> None:
        # The first theme published is the starting one, not a pick: remember from the
        # first change on.
        self._theme_picked = self._theme_picked or theme.name != self.starting_theme
        if self._theme_picked and self.theme_memory is not None:
            try:
                themes.remember_theme(self.theme_memory, theme.name)
            except OSError as error:
                self.notify(f"cannot remember the theme in {self.theme_memory}: {error}",
                            title="Theme", severity="warning")

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """kiwb's plot colours for themes that do not set them (Textual's own, in the palette)."""
        return themes.plot_variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.push_screen(WorkbenchScreen(self.project, self.initial_pane))
        for problem in self.theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=10)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(PANES))
