"""The store feed: every second, in a thread, read what changed in the project and post it.

It follows events by id (the last one seen), so each poll reads only what is new, and it
re-reads kiwb.toml when the file changes. One poll runs at a time; a tick that finds the
previous poll still reading is skipped.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from textual.dom import DOMNode
from textual.message import Message

from kiwb.errors import KiwbError
from kiwb.project.config import load_config
from kiwb.project.paths import ProjectPaths
from kiwb.project.queries import open_store, read_changes
from kiwb.tui.background import run_in_thread
from kiwb.tui.messages import ConfigLoaded, StoreChanged

POLL_S = 1.0
_UNREAD = object()  # the config stamp before the first read


class StoreFeed:
    """Polls a project's store and config from worker threads, posting to `target`."""

    def __init__(self, target: DOMNode, root: Path):
        self.target, self.root = target, root
        self.after_id = 0
        self.integration_stamp: float | None = None
        self.config_stamp: object = _UNREAD
        self._polling = threading.Lock()

    def start(self) -> None:
        self.poll()
        self.target.set_interval(POLL_S, self.poll, name="store feed")

    def reread_config(self) -> None:
        """Read kiwb.toml at the next poll even if it looks unchanged."""
        self.config_stamp = _UNREAD

    def poll(self) -> None:
        run_in_thread(self.target, self._read, action="reading the project", group="feed")

    def _read(self) -> list[Message]:
        if not self._polling.acquire(blocking=False):
            return []
        try:
            messages = self._config_if_changed()
            with open_store(self.root) as store:
                if store is not None:
                    changes = read_changes(store, self.after_id, self.integration_stamp)
                    self.after_id = changes.last_event_id
                    self.integration_stamp = changes.integration_stamp
                    messages.append(StoreChanged(changes))
            return messages
        finally:
            self._polling.release()

    def _config_if_changed(self) -> list[Message]:
        file = ProjectPaths(self.root).config
        try:
            stat = os.stat(file)
            stamp = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        if stamp == self.config_stamp:
            return []
        self.config_stamp = stamp
        try:
            # Problems on disk (a vanished teacher folder) are shown by the panes instead.
            return [ConfigLoaded(load_config(self.root, check_environment=False))]
        except KiwbError as error:
            return [ConfigLoaded(None, str(error))]
