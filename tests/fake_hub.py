"""A stand-in for the Hugging Face Hub's upload API, the one service kiwb talks to that cannot
run here: a local HTTP server huggingface_hub is pointed at through HF_ENDPOINT. It answers the
calls `HfApi.create_repo` and `HfApi.upload_folder` make (create, validate-yaml, preupload,
commit), keeps what was uploaded, and refuses to create repositories named "forbidden"."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeHub:
    endpoint: str = ""
    repos: dict[str, dict] = field(default_factory=dict)  # repo id -> the create request
    files: dict[str, bytes] = field(default_factory=dict)  # path -> content, every commit's
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    tokens: set[str] = field(default_factory=set)  # the bearer tokens it was sent


def serve() -> tuple[FakeHub, ThreadingHTTPServer]:
    """Start a fake Hub on a free port; the caller shuts the server down."""
    hub = FakeHub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            hub.calls.append(("GET", self.path))
            self._send(404, {"error": "not served by the fake Hub"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hub.calls.append(("POST", self.path))
            hub.tokens.add(self.headers.get("authorization", ""))
            if self.path == "/api/repos/create":
                request = json.loads(body)
                repo = "/".join(filter(None, (request.get("organization"), request["name"])))
                if request["name"] == "forbidden":
                    return self._send(403, {"error": "You don't have the rights to create a "
                                                     "model under this namespace"})
                hub.repos[repo] = request
                return self._send(200, {"url": f"{hub.endpoint}/{repo}", "name": repo})
            if self.path == "/api/validate-yaml":
                return self._send(200, {})
            if "/preupload/" in self.path:  # every file inline in the commit: no LFS, no Xet
                return self._send(200, {"files": [
                    {"path": item["path"], "uploadMode": "regular", "shouldIgnore": False}
                    for item in json.loads(body)["files"]]})
            if "/commit/" in self.path:
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        hub.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                repo = self.path.split("/api/models/")[1].split("/commit/")[0]
                return self._send(200, {"commitUrl": f"{hub.endpoint}/{repo}/commit/{'a' * 40}",
                                        "commitOid": "a" * 40, "pullRequestUrl": None})
            self._send(404, {"error": "not served by the fake Hub"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.endpoint = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return hub, server
