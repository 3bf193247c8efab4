"""A customer's key service for the tests: a real HTTP server in a thread.

It implements the ``http`` provider's JSON contract with KEKs of its own (AES Key Wrap), and
checks every request's signature with :func:`search2o.signing.verify`,
answering 401 to a bad one. ``mode`` makes it misbehave: ``slow`` (waits before answering),
``garbage`` (a body that is not JSON), ``short`` (a 16-byte plaintext from /unwrap),
``two-current`` (/versions with two current versions) and ``no-rotate`` (404 on /rotate).
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from search2o.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER
from search2o.signing import verify as verify_signature

PREFIX = "/kms"


class KeyService:
    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.key_id = "customer-kek"
        self.keks: dict[int, bytes] = {1: os.urandom(32)}
        self.retired: set[int] = set()
        self.current = 1
        self.mode = "ok"
        self.calls: list[str] = []
        self.refused = 0
        self.release = threading.Event()
        self.lock = threading.Lock()

    def handle(self, method: str, raw_path: str, headers: Any, body: bytes) -> tuple[int, Any]:
        ok = verify_signature(
            self.secret,
            headers.get(TIMESTAMP_HEADER),
            method,
            raw_path,
            body,
            headers.get(SIGNATURE_HEADER),
        )
        with self.lock:
            if not ok:
                self.refused += 1
                return 401, {"error": "bad signature"}
            route = raw_path.removeprefix(PREFIX)
            self.calls.append(f"{method} {route}")
            if self.mode == "slow":
                self.release.wait(5)
            if self.mode == "garbage":
                return 200, b"<html>not json</html>"
            payload = json.loads(body) if body else {}
            return self._route(method, route, payload)

    def _route(self, method: str, route: str, payload: dict[str, Any]) -> tuple[int, Any]:
        if (method, route) == ("POST", "/wrap"):
            plaintext = base64.b64decode(payload["plaintext"])
            blob = aes_key_wrap(self.keks[self.current], plaintext)
            return 200, {"key_id": self.key_id, "version": self.current, "ciphertext": _b64(blob)}
        if (method, route) == ("POST", "/unwrap"):
            version = payload["version"]
            if payload["key_id"] != self.key_id or version not in self.keks:
                return 410, {"error": "unknown or retired"}
            try:
                plaintext = aes_key_unwrap(
                    self.keks[version], base64.b64decode(payload["ciphertext"])
                )
            except InvalidUnwrap:
                return 422, {"error": "does not unwrap"}
            return 200, {"plaintext": _b64(plaintext[:16] if self.mode == "short" else plaintext)}
        if (method, route) == ("GET", "/versions"):
            numbers = sorted(self.keks.keys() | self.retired)
            items = [
                {
                    "version": n,
                    "current": n == self.current or self.mode == "two-current",
                    "usable": n in self.keks,
                }
                for n in numbers
            ]
            return 200, {"key_id": self.key_id, "versions": items}
        if (method, route) == ("POST", "/rotate"):
            if self.mode == "no-rotate":
                return 404, {"error": "rotated by the HSM team"}
            self.current = max(self.keks.keys() | self.retired) + 1
            self.keks[self.current] = os.urandom(32)
            return 200, {"version": self.current}
        if (method, route) == ("POST", "/retire"):
            version = payload["version"]
            if version not in self.keks:
                return 404, {"error": "unknown or retired"}
            if version == self.current:
                return 409, {"error": "current"}
            del self.keks[version]
            self.retired.add(version)
            return 200, {"version": version}
        return 404, {"error": "no such route"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, reply = self.server.service.handle(method, self.path, self.headers, body)
        data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, service: KeyService) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.service = service


@contextmanager
def running(secret: str) -> Iterator[tuple[KeyService, str]]:
    """Start a key service; yield it and its base URL (with a path prefix)."""
    service = KeyService(secret)
    server = _Server(service)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield service, f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    finally:
        service.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
