"""`kiwb serve`: the workbench in a browser, for a user who forwards a port over SSH rather than
keep a terminal open on the GPU box. textual-serve runs `kiwb ui PROJECT` once per browser tab
and relays its screen over a websocket, so the page is the same workbench, key for key.

It listens on localhost by default: the workbench starts jobs and writes labels, and the page
asks for no password, so reaching it from elsewhere goes through `ssh -L`, which does."""

from __future__ import annotations

import errno
import shlex
import socket
import sys
from pathlib import Path

from kiwb.errors import KiwbError

DEFAULT_PORT = 8765  # not 8000 or 8080, which a notebook or another server often holds


def add_serve_parser(commands) -> None:
    serve = commands.add_parser("serve", help="serve the workbench in a browser on localhost "
                                "(forward the port with ssh -L to open it from your machine)")
    serve.add_argument("project", nargs="?", default=".", type=Path,
                       help="project folder (default: the current folder)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help=f"the port to listen on (default {DEFAULT_PORT})")
    serve.add_argument("--host", default="localhost",
                       help="the address to listen on (default localhost: reach it through "
                       "ssh -L; the page asks for no password, so 0.0.0.0 lets anyone on the "
                       "network start jobs)")
    serve.add_argument("--theme", help="kiwb-dark (default), kiwb-light, kiwb-ansi or a theme of yours")


def workbench_command(project: Path, theme: str | None) -> str:
    """The shell command textual-serve runs for each browser tab: this Python's kiwb ui."""
    words = [sys.executable, "-m", "kiwb", "ui", str(project)]
    if theme:
        words += ["--theme", theme]
    return shlex.join(words)


def refuse_taken_port(host: str, port: int) -> None:
    """Say in one line that the port is taken, before the server starts and fails in a traceback."""
    if not 0 < port < 65536:
        raise KiwbError(f"--port {port}: not a port; choose one from 1024 to 65535")
    try:
        with socket.create_server((host, port)):
            pass
    except socket.gaierror as error:
        raise KiwbError(f"--host {host}: not an address here ({error.strerror}); "
                        "use localhost (the default) or this machine's name") from None
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise KiwbError(f"port {port} is in use on {host} (another kiwb serve?); "
                            f"choose another with --port") from None
        raise KiwbError(f"cannot listen on {host}:{port} ({error.strerror}); choose another "
                        "--port or --host") from None


def ssh_hint(port: int) -> str:
    return (f"From your machine: ssh -N -L {port}:localhost:{port} USER@THIS-HOST, "
            f"then open http://localhost:{port}")


def serve(root: Path, host: str, port: int, theme: str | None) -> int:
    """Serve the workbench of the project folder `root` until Ctrl+C."""
    refuse_taken_port(host, port)
    _server(workbench_command(root, theme), host, port, root).serve()
    return 0


def _server(command_line: str, host: str, port: int, root: Path):
    from textual_serve.server import Server

    class WorkbenchServer(Server):
        """textual-serve's server with kiwb's own opening lines in place of its logo."""

        async def on_startup(self, app) -> None:
            from kiwb.console import stdout

            stdout.print(f"Serving the workbench of {root} at {self.public_url} "
                         "(each browser tab opens its own; Ctrl+C stops)", highlight=False)
            if host in ("localhost", "127.0.0.1", "::1"):
                stdout.print(ssh_hint(port), highlight=False)
            sys.stdout.flush()

    return WorkbenchServer(command_line, host=host, port=port, title=f"kiwb · {root.name}")
