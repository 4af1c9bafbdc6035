"""Label decisions from the Conflicts pane, written to the store in the order they were made.

One thread takes the decisions from a queue and commits each at once (kiwb.project.labels), so
the keys never wait on a store that a scoring job holds, a quick undo never overtakes the label
it takes back, and a killed workbench loses at most the decision being written. The thread
keeps the undo stack, since only it knows what each decision replaced.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from textual.dom import DOMNode

from kiwb.project.labels import GivenLabel, give_label, restore, text_hash
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.background import failure_message
from kiwb.tui.messages import ActionFailed, LabelSaved, LabelUndone

STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class _Give:
    text: str
    label: str | None


class _Undo:
    pass


class LabelWriter:
    """Commits label decisions one by one off the UI thread; posts what happened to `node`."""

    def __init__(self, root: Path, node: DOMNode):
        self.root, self.node = Path(root), node
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._undo: list[tuple[str, GivenLabel | None]] = []  # the thread's alone

    def give(self, text: str, label: str | None) -> None:
        """Label `text` (None: none of these labels)."""
        self._put(_Give(text, label))

    def undo(self) -> None:
        """Take back the last decision still standing."""
        self._put(_Undo())

    def stop(self) -> None:
        """Write what is queued, then end the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(STOP_WAIT_S)
            self._thread = None

    def _put(self, item) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kiwb-label-writer", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        store = None
        try:
            while (item := self._queue.get()) is not None:
                try:
                    store = store or Store(ProjectPaths(self.root).store)
                    self.node.post_message(self._write(store, item))
                except Exception as error:  # told to the user; the next decision still runs
                    self.node.post_message(ActionFailed("saving a label", failure_message(error)))
        finally:
            if store is not None:
                store.close()

    def _write(self, store: Store, item):
        if isinstance(item, _Give):
            previous = give_label(store.connection, item.text, item.label)
            key = text_hash(item.text)
            self._undo.append((key, previous))
            return LabelSaved(key, item.label)
        if not self._undo:
            return ActionFailed("undoing", "nothing to undo: no label was given in this session")
        key, previous = self._undo.pop()
        restore(store.connection, key, previous)
        return LabelUndone(key, previous is not None, previous.label if previous else None)
