"""The Textual workbench (`kiwb`, `kiwb DIR`, `kiwb ui DIR`). Never imports torch, transformers
or datasets: it reads the store and the project's files and starts jobs as processes."""

from __future__ import annotations

from pathlib import Path


def run(project: Path, *, theme: str | None = None, pane: str | None = None) -> int:
    """Open the workbench on a project folder until the user quits; returns the exit code."""
    from kiwb.tui.app import WorkbenchApp
    from kiwb.tui.themes import theme_memory_file

    WorkbenchApp(project, theme=theme, pane=pane, theme_memory=theme_memory_file()).run()
    return 0
