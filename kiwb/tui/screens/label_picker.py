"""Every label of the union in a list, for labels past the number keys (and for any label)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static

from kiwb.project.labels import NONE
from kiwb.tui.labeling import Decision


class LabelPicker(ModalScreen[Decision | None]):
    """Pick a label (or none of these) for one text; esc closes without a decision."""

    DEFAULT_CSS = """
    LabelPicker { align: center middle; }
    LabelPicker > Vertical {
        width: 50; max-width: 100%; height: auto; max-height: 80%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    LabelPicker OptionList { height: auto; max-height: 20; }
    """
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, labels: list[str], text: str):
        super().__init__()
        self.labels, self.text = labels, text

    def compose(self) -> ComposeResult:
        with Vertical():
            shown = self.text if len(self.text) <= 90 else self.text[:89] + "…"
            yield Static(f"Label: {shown}", markup=False)
            yield OptionList(*self.labels, f"{NONE} of these labels", id="label-options")

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        index = event.option_index
        self.dismiss(Decision("label", self.labels[index]) if index < len(self.labels)
                     else Decision("none"))

    def action_close(self) -> None:
        self.dismiss(None)
