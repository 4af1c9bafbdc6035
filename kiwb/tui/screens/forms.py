"""A small modal form: labelled fields, an optional folder browser, errors shown in place.

Submitting runs the form's action in a thread (it may write kiwb.toml or start a job); a
failure is shown inside the form with what to do, success closes it with the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, DirectoryTree, Input, Label, Select, Static

from kiwb.tui.background import run_in_thread
from kiwb.tui.messages import ActionFailed, FormAccepted


@dataclass(frozen=True)
class Field:
    """One form field: a text input, a choice among `choices`, or a yes/no `flag`."""

    name: str
    label: str
    value: str | bool = ""
    placeholder: str = ""
    choices: tuple[str, ...] = ()
    flag: bool = False


class FolderTree(DirectoryTree):
    """A DirectoryTree without hidden entries; with `folders_only`, without files too."""

    def __init__(self, path: Path, folders_only: bool, **kwargs):
        super().__init__(path, **kwargs)
        self.folders_only = folders_only

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and (p.is_dir() or not self.folders_only)]


class FormScreen(ModalScreen[Any]):
    """Fields, an error line and OK / Cancel; `submit(values)` runs off the UI thread."""

    DEFAULT_CSS = """
    FormScreen { align: center middle; }
    FormScreen > Vertical {
        width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    FormScreen .form-title { text-style: bold; margin-bottom: 1; }
    FormScreen #form-fields { height: auto; max-height: 12; }
    FormScreen .form-row { height: 1; }
    FormScreen .form-row Label { width: 16; }
    FormScreen .form-row Input, FormScreen .form-row Select { width: 1fr; }
    FormScreen .form-row Checkbox { width: 1fr; border: none; padding: 0; height: 1; }
    FormScreen FolderTree { height: 8; min-height: 4; border: round $panel; }
    FormScreen #form-error { color: $error; height: auto; }
    FormScreen .form-buttons { height: 1; margin-top: 1; align-horizontal: right; }
    FormScreen .form-buttons Button { margin-left: 2; }
    """
    # Enter submits wherever the focused field does not take it itself (a text box submits
    # too; a dropdown opens, a checkbox toggles, a button presses).
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "OK"),
                Binding("enter", "submit", "OK", show=False)]

    def __init__(self, title: str, fields: list[Field], submit: Callable[[dict[str, Any]], Any],
                 *, browse: str | None = None, browse_root: Path | None = None,
                 folders_only: bool = False, note: str = ""):
        """With `browse` (a field name) and `browse_root`, a folder tree fills that field."""
        self.submitting = False  # set before Screen.__init__, which already asks check_action
        super().__init__()
        self.form_title, self.fields, self.submit = title, fields, submit
        self.browse, self.browse_root, self.note = browse, browse_root, note
        self.folders_only = folders_only

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.form_title, classes="form-title")
            if self.note:
                yield Static(self.note)
            with VerticalScroll(id="form-fields"):
                for field in self.fields:
                    with Horizontal(classes="form-row"):
                        yield Label(field.label)
                        yield self._input(field)
            if self.browse and self.browse_root is not None:
                yield FolderTree(self.browse_root, folders_only=self.folders_only)
            yield Static("", id="form-error")
            with Horizontal(classes="form-buttons"):
                yield Button("OK", variant="primary", id="form-ok", compact=True)
                yield Button("Cancel", id="form-cancel", compact=True)

    def on_mount(self) -> None:
        """The first field takes the keys at once: typing goes into it, Enter submits."""
        fields = self.query("#form-fields Input, #form-fields Select, #form-fields Checkbox")
        (fields.first() if fields else self.query_one("#form-ok", Button)).focus()

    def _input(self, field: Field):
        widget_id = f"field-{field.name}"
        if field.flag:
            return Checkbox(field.placeholder, value=bool(field.value), id=widget_id, compact=True)
        if field.choices:
            return Select([(c, c) for c in field.choices], value=field.value or field.choices[0],
                          allow_blank=False, id=widget_id, compact=True)
        return Input(str(field.value), placeholder=field.placeholder, id=widget_id, compact=True)

    def values(self) -> dict[str, Any]:
        found = {}
        for field in self.fields:
            widget = self.query_one(f"#field-{field.name}")
            found[field.name] = widget.value if not isinstance(widget, Input) else widget.value.strip()
        return found

    @on(DirectoryTree.DirectorySelected)
    @on(DirectoryTree.FileSelected)
    def _browsed(self, event: DirectoryTree.FileSelected) -> None:
        event.stop()
        if self.browse:
            self.query_one(f"#field-{self.browse}", Input).value = str(event.path)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While a submission runs, ctrl+s shows greyed out and does nothing.
        return None if action == "submit" and self.submitting else True

    @on(Input.Submitted)
    @on(Button.Pressed, "#form-ok")
    def action_submit(self) -> None:
        if self.submitting:
            return  # enter in a field is no binding: a second submit would start a second job
        self._set_submitting(True)
        self.query_one("#form-error", Static).update("working…")
        values = self.values()
        run_in_thread(self, lambda: FormAccepted(self.submit(values)), action=self.form_title,
                      group="form")

    def _set_submitting(self, submitting: bool) -> None:
        self.submitting = submitting
        self.query_one("#form-ok", Button).disabled = submitting
        self.refresh_bindings()

    @on(Button.Pressed, "#form-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_action_failed(self, message: ActionFailed) -> None:
        message.stop()
        self._set_submitting(False)
        self.query_one("#form-error", Static).update(message.message)

    def on_form_accepted(self, message: FormAccepted) -> None:
        message.stop()
        self.dismiss(message.value)
