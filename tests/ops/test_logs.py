"""Log lines carry request, run and job ids, and never message text, queries, tokens or keys.

Every line search2o and uvicorn log (at DEBUG) while a server in token mode takes an upload
(ingested by a job), a search and streamed chat turns is captured as JSON and searched for
canaries planted in the document, the query, the message and the token.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from search2o.api.app import create_app
from search2o.logs import JsonFormatter
from search2o.runtime import Runtime
from search2o.signin import COOKIE_NAME, issue_login_link
from tests.api.test_api import add_user, serve
from tests.ops.conftest import streamed_chat

pytestmark = pytest.mark.slow

DOC_CANARY = "quokka7731"
QUERY_CANARY = "narwhal5512"
CHAT_CANARY = "axolotl9043"
LOGGERS = ("search2o", "uvicorn", "uvicorn.error")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured(token_runtime: Runtime) -> Iterator[tuple[Any, _Capture, dict[str, str]]]:
    app = create_app(token_runtime.settings, runtime=token_runtime)  # configures logging
    capture = _Capture()
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(capture)
        logger.setLevel(logging.DEBUG)
    auth = add_user(token_runtime, "ann@example.com", admin=True)
    try:
        with serve(app) as client:
            yield client, capture, auth
    finally:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(capture)


def test_no_content_or_secret_reaches_a_log_line(
    captured: tuple[Any, _Capture, dict[str, str]],
) -> None:
    client, capture, auth = captured
    document = f"# Parking\n\nThe {DOC_CANARY} garage is under building B.\n".encode()
    upload = client.post(
        "/v1/documents?wait=60",
        files=[("files", ("parking.md", document, "text/markdown"))],
        headers=auth,
    )
    assert upload.status_code == 201, upload.text
    search = client.post("/v1/search", json={"query": f"{QUERY_CANARY} garage"}, headers=auth)
    assert search.status_code == 200, search.text
    events = streamed_chat(client, f"Where is the {CHAT_CANARY} garage?", **auth)
    assert events[-1] == "done", events
    token = auth["Authorization"].removeprefix("Bearer ")
    text = "\n".join(capture.lines)
    assert len(capture.lines) >= 5
    for secret in (DOC_CANARY, QUERY_CANARY, CHAT_CANARY, token, token[:12]):
        assert secret not in text, f"{secret!r} was logged"


def test_sign_in_secrets_are_never_logged(
    token_runtime: Runtime, captured: tuple[Any, _Capture, dict[str, str]]
) -> None:
    client, capture, _ = captured
    with token_runtime.database.session() as session:
        link = issue_login_link(session, "ann@example.com", 5).value
    assert client.get(f"/v1/auth/link/{link}").status_code == 200  # the app's page asks
    response = client.post(
        f"/v1/auth/link/{link}",
        headers={"X-Search2o-Client": "web", "Origin": str(client.base_url)},
    )
    assert response.status_code == 200, response.text
    cookie = response.cookies[COOKIE_NAME]
    client.cookies.clear()
    assert client.get("/v1/me", headers={"Cookie": f"{COOKIE_NAME}={cookie}"}).status_code == 200
    text = "\n".join(capture.lines)
    assert '"/v1/auth/link/{value}"' in text  # the line is there, without the value
    for secret in (link, cookie):
        assert secret not in text, f"{secret!r} was logged"


def test_lines_carry_request_run_and_job_ids(
    captured: tuple[Any, _Capture, dict[str, str]],
) -> None:
    client, capture, auth = captured
    upload = client.post(
        "/v1/documents?wait=60",
        files=[("files", ("lunch.md", b"# Lunch\n\nLunch is at noon.\n", "text/markdown"))],
        headers=auth,
    )
    assert upload.status_code == 201, upload.text
    streamed_chat(client, "When is lunch?", **auth)
    # The request's line is written once the response is over, just after its last byte.
    deadline = time.monotonic() + 10
    while not any('"route": "/v1/chat"' in line for line in capture.lines):
        assert time.monotonic() < deadline, "no log line for the chat request"
        time.sleep(0.05)
    records = [json.loads(line) for line in capture.lines]
    requests = [r for r in records if r["event"] == "request"]
    assert all(r["request_id"] for r in requests)
    chat = [r for r in requests if r["route"] == "/v1/chat"]
    assert len(chat) == 1 and len(chat[0]["run_id"]) >= 16, chat
    ingested = [r for r in records if r["event"] == "job done" and r["kind"] == "documents.ingest"]
    assert ingested, [r["event"] for r in records]
    # Bound by the consumer for every line of the delivery, not passed by the caller.
    assert all(r["job_id"] == r["job"] for r in ingested)
    # The request that enqueued the upload and the job's own lines are told apart.
    upload_lines = [r for r in requests if r["route"] == "/v1/documents"]
    assert upload_lines and "job_id" not in upload_lines[0]
