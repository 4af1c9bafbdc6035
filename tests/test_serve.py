"""`kiwb serve`: the workbench in a real browser. Debian's chromium, headless, driven by
Playwright; the screen is read by replaying the bytes the page received over its websocket
into a terminal emulator (pyte) of the size the page asked for, since xterm.js paints a canvas."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from browser import chromium, needs_browser
from cli_helpers import Deadline, kiwb_env, run_kiwb
from tui_support import synthetic_project


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def test_serve_refuses_a_taken_port_in_one_line(tmp_path):
    project = synthetic_project(tmp_path / "proj", scored=False, trained=False)
    with socket.create_server(("localhost", 0)) as taken:
        port = taken.getsockname()[1]
        refused = run_kiwb("serve", project, "--port", str(port), cwd=tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert f"port {port} is in use on localhost" in refused.stderr and "--port" in refused.stderr
    missing = run_kiwb("serve", tmp_path / "nowhere", cwd=tmp_path, check=False)
    assert missing.returncode == 2 and "no such folder" in missing.stderr


@pytest.fixture
def served(tmp_path):
    """`kiwb serve` on a synthetic project, as a user starts it; stopped with Ctrl+C."""
    project = synthetic_project(tmp_path / "proj")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "kiwb", "serve", str(project), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(kiwb_env(), PYTHONUNBUFFERED="1"))
    first = server.stdout.readline()  # printed once it listens
    second = server.stdout.readline()
    assert first.startswith(f"Serving the workbench of {project} at http://localhost:{port}"), (
        first + server.stderr.read() if server.poll() is not None else first)
    assert second.strip() == (f"From your machine: ssh -N -L {port}:localhost:{port} "
                              f"USER@THIS-HOST, then open http://localhost:{port}")
    yield f"http://localhost:{port}", server
    if server.poll() is None:
        server.send_signal(subprocess.signal.SIGINT)
        assert server.wait(timeout=20) == 0


class BrowserScreen:
    """What a browser tab shows: the bytes the app sent, replayed into a terminal of its size."""

    def __init__(self, page):
        self.page, self.received, self.size = page, [], None
        page.on("websocket", self._watch)

    def _watch(self, socket_) -> None:
        socket_.on("framereceived", lambda data: self.received.append(data)
                   if isinstance(data, bytes) else None)
        socket_.on("framesent", self._sent)

    def _sent(self, data) -> None:
        message = json.loads(data) if isinstance(data, str) else None
        if message and message[0] == "resize":
            self.size = message[1]["width"], message[1]["height"]

    def text(self) -> str:
        import pyte

        width, height = self.size
        screen = pyte.Screen(width, height)
        pyte.ByteStream(screen).feed(b"".join(self.received))
        return "\n".join(line.rstrip() for line in screen.display)

    def wait_for(self, words: str, timeout: float = 30, *, gone: bool = False) -> str:
        """The screen once it shows `words` (or, with `gone`, once it no longer does)."""
        deadline = Deadline(timeout, repr(words))
        while True:
            self.page.wait_for_timeout(200)  # lets Playwright deliver the frames
            shown = self.text() if self.size else ""
            if (words in shown) != gone:
                return shown
            if deadline.expired:  # the message shows the screen as it was
                raise AssertionError(f"{words!r} {'still' if gone else 'never'} shown; "
                                     f"the screen:\n{shown}")


@pytest.mark.slow
@needs_browser
def test_the_workbench_in_a_browser_reads_the_project_and_takes_keys(served):
    url, server = served
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        screen = BrowserScreen(page)
        page.goto(url)
        shown = screen.wait_for("union labels: sports, politics, music, cooking")
        assert "1 Teachers" in shown and "BertForSequenceClassification" in shown
        width, height = screen.size
        assert width >= 120 and height >= 30  # the page's size, not a default 80x24
        page.click(".textual-terminal")
        page.keyboard.type("3")  # the Jobs pane
        screen.wait_for("score")
        page.keyboard.type("?")
        shown = screen.wait_for("kiwb workbench: keys")
        assert "Where classes go" in shown
        page.keyboard.press("Escape")
        screen.wait_for("kiwb workbench: keys", gone=True)
        page.keyboard.type("6")  # the Conflicts pane, from the project's integration
        screen.wait_for("the minister sang at the stadium concert")
        page.keyboard.type("q")  # the app ends; the page says its connection closed
        page.wait_for_selector("body.-closed", timeout=20_000)
    assert server.poll() is None  # the server outlives a tab: the next one opens a workbench
