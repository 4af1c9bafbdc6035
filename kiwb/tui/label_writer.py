"""Label decisions from the Conflicts pane, written to the store in the order they were made.

One thread takes the decisions from a queue and commits each at once (kiwb.project.labels), so
the keys never wait on a store that a scoring job holds, a quick undo never overtakes the label
it takes back, and a killed workbench loses at most the decision being written. A store held
by a job (an integration rewriting a million rows) makes a decision wait and try again, never
drop. The thread keeps the undo stack, since only it knows what each decision replaced.
"""

from __future__ import annotations

import datetime
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from textual.dom import DOMNode

from kiwb.project.labels import GivenLabel, give_labels, restore, text_hash
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.tui.background import failure_message
from kiwb.tui.messages import ActionFailed, LabelFailed, LabelSaved, LabelUndone

# On quit, how long to wait for decisions queued behind a job that holds the store; a write
# waits for the store up to its busy timeout (30 s) and is then tried again.
STOP_WAIT_S = 120.0
RETRY_AFTER_S = 0.5


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
        self._kept = False  # the labels before this session are in the history
        self._since = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")

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

    @property
    def pending(self) -> int:
        """Decisions not yet committed (about: the one being written may be counted)."""
        return self._queue.qsize()

    def _put(self, item) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kiwb-label-writer", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        store = None
        try:
            while (item := self._queue.get()) is not None:
                while True:
                    try:
                        store = store or Store(ProjectPaths(self.root).store)
                        self.node.post_message(self._write(store, item))
                    except sqlite3.OperationalError as error:
                        if not _busy(error):
                            self._failed(item, error)
                            break
                        time.sleep(RETRY_AFTER_S)  # a job holds the store: the decision waits
                        continue
                    except Exception as error:  # told to the user; the next decision still runs
                        self._failed(item, error)
                    break
        finally:
            if store is not None:
                store.close()

    def _failed(self, item, error: BaseException) -> None:
        if isinstance(item, _Give):  # the pane shows the text as it was again
            self.node.post_message(LabelFailed(text_hash(item.text)))
        action = "saving a label" if isinstance(item, _Give) else "undoing"
        self.node.post_message(ActionFailed(action, failure_message(error)))

    def _write(self, store: Store, item):
        if isinstance(item, _Give):
            # the labels as they were before this session are kept once, in the history
            keep = None if self._kept else f"the workbench's labels of a session from {self._since}"
            previous = give_labels(store.connection, [(item.text, item.label)], keep=keep)[0]
            self._kept = True
            key = text_hash(item.text)
            self._undo.append((key, previous))
            return LabelSaved(key, item.label)
        if not self._undo:
            return ActionFailed("undoing", "nothing to undo: no label was given in this session")
        key, previous = self._undo[-1]
        restore(store.connection, key, previous)
        self._undo.pop()  # only once restored: a busy store retries the same undo
        return LabelUndone(key, previous is not None, previous.label if previous else None)


def _busy(error: sqlite3.OperationalError) -> bool:
    return "locked" in str(error) or "busy" in str(error)
