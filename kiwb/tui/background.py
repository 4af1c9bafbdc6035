"""Running store reads and actions off the UI thread, turning every failure into a message."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from textual.dom import DOMNode
from textual.message import Message
from textual.worker import Worker, get_current_worker

from kiwb.errors import KiwbError
from kiwb.tui.messages import ActionFailed

Work = Callable[[], Message | list[Message] | None]


def failure_message(error: BaseException) -> str:
    """What to tell the user about an error: kiwb's own one-liners as they are."""
    if isinstance(error, KiwbError):
        return str(error)
    if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
        return "the project store is busy (a job is writing); it is read again in a moment"
    if isinstance(error, sqlite3.Error):
        return f"the project store cannot be read ({error}); check the disk and the file's permissions"
    if isinstance(error, OSError):
        return f"{error.strerror or error}: {error.filename or ''}".rstrip(": ")
    return f"{type(error).__name__}: {error} (unexpected: please report it with the steps that led here)"


def cancelled() -> bool:
    """Inside a thread worker: whether the worker was cancelled (a newer request, or exit)."""
    return get_current_worker().is_cancelled


def run_in_thread(node: DOMNode, work: Work, *, action: str, group: str = "default",
                  exclusive: bool = False) -> Worker:
    """Run `work` in a thread worker and post what it returns to `node` (or ActionFailed).

    With `exclusive`, a newer call in the same group cancels an older one, whose result is
    then dropped rather than posted.
    """
    def body() -> None:
        try:
            result = work()
        except Exception as error:  # every failure becomes a message, never a traceback
            result = ActionFailed(action, failure_message(error))
        if get_current_worker().is_cancelled:
            return
        for message in result if isinstance(result, list) else [result]:
            if message is not None:
                node.post_message(message)

    return node.run_worker(body, name=action, group=group, exclusive=exclusive, thread=True,
                           exit_on_error=False)
