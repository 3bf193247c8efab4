"""A reference state hook, in memory, served over real loopback HTTP (as an enterprise would).

:class:`ReferenceHook` keeps the contract of :mod:`search2o.state.hooks`: the owner's email is
recorded by the first save and checked on every call, saves are a compare-and-swap on the
version, deletes leave a tombstone. :func:`serve_hook` serves it at
``http://127.0.0.1:<port>/hooks/state`` and checks every request's signature. ``faults`` make
it misbehave on purpose, per operation (``save``, ``restore``, ``delete``).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from search2o.errors import ConflictError, NotFoundError
from search2o.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify

BASE_PATH = "/hooks/state"


@dataclass
class _Record:
    owner: str
    version: int
    state: dict[str, Any]


class ReferenceHook:
    """An in-memory :class:`~search2o.state.hooks.StateHook`.

    Args:
        cas: check ``expected_version`` (a hook with ``cas=False`` loses updates, on purpose).

    """

    def __init__(self, *, cas: bool = True) -> None:
        self.cas = cas
        self.records: dict[str, _Record] = {}
        self.tombstones: set[str] = set()
        self._lock = threading.Lock()

    def save(
        self, conversation_id: str, user_email: str, state: dict[str, Any], expected_version: int
    ) -> int:
        with self._lock:
            if conversation_id in self.tombstones:
                raise NotFoundError("deleted")
            record = self.records.get(conversation_id)
            if record is None:
                if self.cas and expected_version != 0:
                    raise ConflictError("no state yet")
                self.records[conversation_id] = _Record(user_email, 1, copy.deepcopy(state))
                return 1
            if record.owner != user_email:
                raise NotFoundError("not yours")
            if self.cas and record.version != expected_version:
                raise ConflictError(f"at version {record.version}")
            record.version += 1
            record.state = copy.deepcopy(state)
            return record.version

    def restore(self, conversation_id: str, user_email: str) -> dict[str, Any] | None:
        with self._lock:
            record = self.records.get(conversation_id)
            if record is None or record.owner != user_email:
                return None
            return {"state": copy.deepcopy(record.state), "version": record.version}

    def delete_conversation(self, conversation_id: str, user_email: str) -> None:
        with self._lock:
            record = self.records.get(conversation_id)
            if record is not None and record.owner != user_email:
                raise NotFoundError("not yours")
            self.records.pop(conversation_id, None)
            self.tombstones.add(conversation_id)


@dataclass
class HookServer:
    """A running server: its URL, the hook behind it, and switches for misbehaviour."""

    url: str
    secret: str
    hook: ReferenceHook
    faults: dict[str, str] = field(default_factory=dict)
    slow_s: float = 2.0
    requests: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(server: HookServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _reply(self, status: int, body: Any = None, raw: bytes | None = None) -> None:
            data = (
                raw if raw is not None else json.dumps(body).encode() if body is not None else b""
            )
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not verify(
                server.secret,
                self.headers.get(TIMESTAMP_HEADER, ""),
                "POST",
                self.path,
                body,
                self.headers.get(SIGNATURE_HEADER, ""),
            ):
                self._reply(401, {"error": "bad signature"})
                return
            operation = self.path.removeprefix(BASE_PATH + "/")
            server.requests.append(operation)
            fault = server.faults.get(operation)
            if fault == "slow":
                server.release.wait(server.slow_s)
                self._reply(503, {"error": "too late"})
                return
            if fault == "500":
                self._reply(500, {"error": "boom"})
                return
            if fault == "not_json":
                self._reply(200, raw=b"<html>proxy error</html>")
                return
            try:
                request = json.loads(body)
            except ValueError:
                self._reply(400, {"error": "not JSON"})
                return
            problem = _problem(operation, request)
            if problem:
                self._reply(422, {"error": problem})
                return
            try:
                self._dispatch(operation, request, fault)
            except NotFoundError:
                self._reply(404, {"error": "not found"})
            except ConflictError:
                self._reply(409, {"error": "conflict"})

        def _dispatch(self, operation: str, request: dict[str, Any], fault: str | None) -> None:
            hook, cid, email = server.hook, request["conversation_id"], request["user_email"]
            if operation == "save":
                if fault == "bad_version":  # a broken hook: stores nothing, answers nonsense
                    self._reply(200, {"version": "two"})
                    return
                version = hook.save(cid, email, request["state"], request["expected_version"])
                self._reply(200, {"version": version})
            elif operation == "restore":
                found = hook.restore(cid, email)
                if found is None:
                    self._reply(404, {"error": "not found"})
                elif fault == "malformed_state":
                    found["state"]["runs"] = [{"run_id": "r", "agent": "a", "status": "odd"}]
                    self._reply(200, found)
                else:
                    self._reply(200, found)
            elif operation == "delete":
                hook.delete_conversation(cid, email)
                self._reply(204)
            else:
                self._reply(404, {"error": "no such operation"})

    return Handler


def _problem(operation: str, request: Any) -> str | None:
    if not isinstance(request, dict):
        return "body must be an object"
    if not isinstance(request.get("conversation_id"), str):
        return "conversation_id must be a string"
    if not isinstance(request.get("user_email"), str):
        return "user_email must be a string"
    if operation == "save":
        if not isinstance(request.get("state"), dict):
            return "state must be an object"
        version = request.get("expected_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            return "expected_version must be an integer >= 0"
    return None


@contextmanager
def serve_hook(secret: str = "s3cret-for-tests", *, cas: bool = True) -> Iterator[HookServer]:
    """Serve a :class:`ReferenceHook` on a free loopback port until the block ends."""
    hook = ReferenceHook(cas=cas)
    state = HookServer(url="", secret=secret, hook=hook)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}{BASE_PATH}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
