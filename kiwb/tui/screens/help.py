"""The help screen: every key, read from the bindings themselves so it cannot drift."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

GLOBAL_KEYS = (
    ("1 … 7", "switch pane: Teachers, Data, Jobs, Uncertainty, Accuracy, Conflicts, Export"),
    ("tab / shift+tab", "move between fields and lists"),
    ("↑ ↓ pgup pgdn", "move in a list"),
    ("enter", "open / confirm (a conflict's details, a form)"),
    ("esc", "close a dialog; back to the list"),
    ("ctrl+p", "command palette: switch theme (\"theme\"), quit, keys"),
    ("? / f1", "this help"),
    ("q / ctrl+q", "quit (jobs keep running); in a text box only ctrl+q"),
)
PANE_EXTRAS = {"Conflicts": (
    ("enter", "details of the text (label it there with the same keys)"),
    ("l, then 1 … 9", "labeling on: give the selected text a label; the cursor moves on"),
    ("0 or n / s / u / p", "while labeling: none of these labels / skip / undo / every label"),
    ("o / f", "lowest margin, most useful next or a random sample / all, unlabeled or "
               "labeled texts"),
    ("r / t", "integrate with the labels (stacked routing) / train a student from them"),
)}


def key_name(binding: Binding) -> str:
    return binding.key_display or binding.key.replace("slash", "/")


def keys_table(panes) -> Table:
    """Global keys, then each pane's own keys, as a two-column table."""
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_row(Text("Everywhere", "underline"), "")
    for key, meaning in GLOBAL_KEYS:
        table.add_row(key, meaning)
    for pane in panes:
        rows = [(key_name(b), b.description) for b in pane.BINDINGS
                if isinstance(b, Binding) and b.description and b.key != "enter"]
        rows += list(PANE_EXTRAS.get(pane.TITLE, ()))
        if rows:
            table.add_row("", "")
            table.add_row(Text(pane.TITLE, "underline"), "")
            for key, meaning in rows:
                table.add_row(key, meaning)
    return table


class HelpScreen(ModalScreen[None]):
    """A scrollable list of keys; any of esc, q or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 80; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, panes) -> None:
        super().__init__()
        self.panes = panes

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("kiwb workbench: keys", "bold"))
            yield Static(keys_table(self.panes))

    def action_close(self) -> None:
        self.dismiss(None)
