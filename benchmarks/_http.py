"""What the HTTP benchmarks share: a free local port and one browser's keep-alive JSON client."""

from __future__ import annotations

import http.client
import json
import socket


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JsonClient:
    """One browser's worth of HTTP: a keep-alive connection and its learner cookie (the first
    one the server sets, unless one is given)."""

    def __init__(self, port: int, cookie: str = "", timeout: float = 60) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.cookie = cookie

    def request_raw(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers=headers)
        resp = self.conn.getresponse()
        data = resp.read()
        cookie = resp.getheader("set-cookie")
        if cookie and not self.cookie:
            self.cookie = cookie.split(";")[0]
        return resp.status, data

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        status, data = self.request_raw(method, path, body)
        return status, json.loads(data) if data else {}
