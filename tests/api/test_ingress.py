"""What every request meets before a route: authentication before the body, body bounds,
strict JSON, the framework's errors in our body, complete ``Allow`` headers, security headers."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from search2o.api.app import create_app
from search2o.api.ingress import DISCARD_BYTES, OPEN_PATHS, SIGNIN_PREFIX
from search2o.config import Settings
from search2o.runtime import Runtime
from tests.api.test_api import add_user, assert_input_error, md, serve, stored


def raw_request(client: httpx.Client, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (and ``body``) on a new socket; return the status and the first bytes read.

    Lets a test send headers that announce a body it never sends: a server that answers at
    once has not waited for (nor read) that body.
    """
    url = client.base_url
    with socket.create_connection((url.host, url.port or 80), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data


@pytest.fixture
def api(runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


# --- authentication before the body ----------------------------------------------------------


def test_unauthenticated_huge_body_is_refused_before_it_is_read(token_api: httpx.Client) -> None:
    head = (
        "POST /v1/chat HTTP/1.1\nHost: localhost\ncontent-type: application/json\n"
        f"content-length: {200 * 1024 * 1024}\n"
    )
    status, data = raw_request(token_api, head)  # 200 MiB announced, none sent
    assert status == 401
    assert b"www-authenticate: bearer" in data.lower()
    bad_token = head + "authorization: Bearer s2o_not-a-token\n"
    assert raw_request(token_api, bad_token)[0] == 401


def closes_after_refusing(client: httpx.Client, head: str, chunk: bytes) -> tuple[bytes, int]:
    """Send ``head`` then keep sending ``chunk`` until the server closes; return what it said.

    Returns:
        the response's head and the bytes the socket took before the server cut it (what the
        kernel buffers hold: a server that read the whole body would take all 64 MiB).

    """
    url = client.base_url
    sent = 0
    with socket.create_connection((url.host, url.port or 80), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        with contextlib.suppress(OSError):  # reset by the server once it closed
            while sent < 64 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
        data = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in data and (more := sock.recv(65536)):
                data += more
    return data.split(b"\r\n\r\n")[0].lower(), sent


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_refused_body_is_never_read_the_connection_is_closed(
    token_api: httpx.Client, framing: str
) -> None:
    block = b"x" * 65536
    if framing == "chunked":
        head = "POST /v1/chat HTTP/1.1\nHost: localhost\ntransfer-encoding: chunked\n"
        chunk = b"%x\r\n" % len(block) + block + b"\r\n"
    else:
        head = f"POST /v1/chat HTTP/1.1\nHost: localhost\ncontent-length: {64 << 20}\n"
        chunk = block
    response, sent = closes_after_refusing(token_api, head, chunk)
    assert response.startswith(b"http/1.1 401"), response
    assert b"connection: close" in response
    assert sent < 32 * 1024 * 1024, sent  # cut long before the 64 MiB were taken


def test_a_refusal_with_little_or_no_body_keeps_the_connection(token_api: httpx.Client) -> None:
    first = token_api.get("/v1/me")
    assert first.status_code == 401
    assert "connection" not in first.headers  # keep-alive: nothing left unread
    # A small body is read and thrown away: the client that wrote it all reads the answer.
    small = token_api.post("/v1/chat", content=b"x" * DISCARD_BYTES)
    assert small.status_code == 401
    assert "connection" not in small.headers
    assert token_api.get("/v1/health").status_code == 200


def test_an_authenticated_body_over_the_bound_is_refused_from_its_length(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    auth = add_user(token_runtime, "ann@example.com")["Authorization"]
    head = (
        "POST /v1/chat HTTP/1.1\nHost: localhost\ncontent-type: application/json\n"
        f"authorization: {auth}\ncontent-length: {200 * 1024 * 1024}\n"
    )
    status, data = raw_request(token_api, head)  # 200 MiB announced, none sent
    assert status == 413
    assert b"connection: close" in data.lower()
    streamed = token_api.post(
        "/v1/chat",
        content=(b"x" * 65536 for _ in range(64)),  # 4 MiB, chunked: no Content-Length
        headers={"Authorization": auth, "content-type": "application/json"},
    )
    assert streamed.status_code == 413
    assert streamed.headers["connection"] == "close"  # the rest is never read
    detail = streamed.json()["detail"]
    assert detail["error"] == "PayloadTooLargeError"
    assert detail["field"] == "body"
    assert detail["reason"] == "is larger than 1048576 bytes (api.max_body_bytes)"


def test_bounds_are_per_route_and_from_settings(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, embedder: Any
) -> None:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("data"),
        database_url=database_url,
        api={"max_body_bytes": 4096, "max_upload_bytes": 64 * 1024, "max_definition_bytes": 2048},
    )
    runtime = Runtime(settings, embedder=embedder)
    try:
        with serve(create_app(settings, runtime=runtime)) as client:
            search = client.post("/v1/search", json={"query": "x" * 5000})
            assert search.status_code == 413
            assert "api.max_body_bytes" in search.json()["detail"]["reason"]
            agent = client.put("/v1/agents/big", content=b"{" + b" " * 3000 + b"}")
            assert agent.status_code == 413
            assert "api.max_definition_bytes" in agent.json()["detail"]["reason"]
            # An upload of 20 KiB passes the 4 KiB JSON bound: uploads have their own.
            ok = client.post(
                "/v1/documents?wait=60", files=[md("a.md", b"# A\n\n" + b"word " * 4000)]
            )
            assert ok.status_code == 201, ok.text
            big = client.post(
                "/v1/documents?wait=60", files=[md("b.md", b"# B\n\n" + b"w " * 40000)]
            )
            assert big.status_code == 413
            assert "api.max_upload_bytes" in big.json()["detail"]["reason"]
            assert stored(runtime)[0] == 1  # only the upload within its bound
    finally:
        runtime.close()


# --- strict JSON -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"query": "caf\xe9"}', "not UTF-8 (byte 14)"),
        (b'{"query": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nested deeper than 64 levels"),
        (b'{"query": "x", "k": ' + b"[" * 70 + b"]" * 70 + b"}", "nested deeper than 64 levels"),
        (b'{"query": "x", "k": ' + b"9" * 5000 + b"}", "more than 4300 digits"),
        (b'{"query": "x", "k": NaN}', "NaN is not a JSON value"),
        (b'{"query": "x"', "Expecting"),
        # which copy wins differs between parsers (a proxy may read the other one)
        (b'{"query": "x", "k": 1, "k": 50}', "duplicate name 'k'"),
        (b'{"query": "x", "filters": {"a": 1, "a": 2}}', "duplicate name 'a'"),
    ],
)
def test_bodies_that_do_not_parse_answer_422_naming_the_reason(
    api: httpx.Client, body: bytes, reason: str
) -> None:
    response = api.post("/v1/search", content=body, headers={"content-type": "application/json"})
    detail = assert_input_error(response, 422, "body")
    assert reason in detail["reason"], detail


def test_malformed_multipart_and_bad_file_names_answer_422(
    runtime: Runtime, api: httpx.Client
) -> None:
    broken = api.post(
        "/v1/documents?wait=60",
        content=b"--b\r\nFalse--b--\r\n",
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    assert "cannot be parsed" in assert_input_error(broken, 422, "body")["reason"]
    # A 5,000-character name does not even parse as multipart; 1,500 parses and is too long.
    huge_name = api.post("/v1/documents?wait=60", files=[md("n" * 5000 + ".md", b"# A\n\nText.\n")])
    assert "cannot be parsed" in assert_input_error(huge_name, 422, "body")["reason"]
    long_name = api.post("/v1/documents?wait=60", files=[md("n" * 1500 + ".md", b"# A\n\nText.\n")])
    assert "1503 characters" in assert_input_error(long_name, 422, "files[0]")["reason"]
    nul_path = api.post(
        "/v1/documents?wait=60", files=[md("a.md", b"# A\n\nText.\n")], data={"paths": "a\x00b.md"}
    )
    assert_input_error(nul_path, 422, "paths[0]")
    assert stored(runtime) == (0, 0, 0)


def test_windows_style_names_keep_their_whole_identity(runtime: Runtime, api: httpx.Client) -> None:
    for path, text in ((r"C:\Windows\system32\x.md", b"one"), (r"D:\other\x.md", b"two")):
        response = api.post(
            "/v1/documents?wait=60", files=[md(path, b"# X\n\nCopy " + text + b".\n")]
        )
        assert response.status_code == 201, response.text
        assert response.json()[0]["status"] == "added"
    sources = sorted(d["source"] for d in api.get("/v1/documents").json())
    assert sources == [r"upload:C:\Windows\system32\x.md", r"upload:D:\other\x.md"]


def test_search_refuses_unknown_fields_and_lone_surrogates(api: httpx.Client) -> None:
    assert_input_error(api.post("/v1/search", json={"query": "x", "kk": 3}), 422, "kk")
    surrogate = b'{"query": "vacation \\ud800"}'
    for path in ("/v1/search", "/v1/memories/search"):
        response = api.post(path, content=surrogate, headers={"content-type": "application/json"})
        detail = assert_input_error(response, 422, "query")
        assert "lone surrogate" in detail["reason"]
        nul = api.post(path, json={"query": "a\x00b"})
        assert "NUL" in assert_input_error(nul, 422, "query")["reason"]


# --- ids and numbers out of range ------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/documents/10000000000000000001",
        "/v1/documents/2147483648",
        "/v1/documents/0",
    ],
)
def test_document_ids_out_of_range_answer_422(api: httpx.Client, path: str) -> None:
    assert_input_error(api.delete(path), 422, "document_id")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/conversations?offset=10000000000000000000", "offset"),
        ("/v1/conversations?offset=1000001", "offset"),
        ("/v1/conversations?limit=0", "limit"),
        ("/v1/memories?offset=-1", "offset"),
        ("/v1/memories?limit=100000", "limit"),
    ],
)
def test_paging_out_of_range_answers_422(api: httpx.Client, path: str, field: str) -> None:
    assert_input_error(api.get(path), 422, field)


# --- the framework's errors in our body ------------------------------------------------------


def test_unknown_paths_and_methods_answer_in_our_body(api: httpx.Client) -> None:
    missing = api.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.json()["detail"]["error"] == "NotFoundError"
    wrong = api.post("/v1/conversations/abc")
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "DELETE, GET, HEAD, PATCH"
    assert wrong.json()["detail"]["error"] == "MethodNotAllowed"
    assert api.put("/v1/search").headers["allow"] == "POST"


# --- headers ----------------------------------------------------------------------------------


def test_every_response_carries_nosniff_and_api_answers_a_locked_csp(
    api: httpx.Client, token_api: httpx.Client
) -> None:
    responses = [
        api.get("/v1/health"),
        api.get("/v1/nothing-here"),
        api.post("/v1/search", json={"query": ""}),
        token_api.get("/v1/documents"),  # 401
        api.get("/openapi.json"),
    ]
    for response in responses:
        assert response.headers["x-content-type-options"] == "nosniff", response.url
        assert response.headers["content-security-policy"] == (
            "default-src 'none'; frame-ancestors 'none'"
        )
        assert response.headers["x-frame-options"] == "DENY"
    with api.stream("POST", "/v1/chat", json={"message": "hello"}) as stream:
        assert stream.headers["x-content-type-options"] == "nosniff"
        assert stream.headers["content-type"].startswith("text/event-stream")


def test_api_pages_have_a_csp_that_allows_only_their_own_scripts(api: httpx.Client) -> None:
    import base64
    import hashlib
    import re

    for path in ("/docs", "/redoc"):
        page = api.get(path)
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp
        assert page.headers["x-frame-options"] == "DENY"
        assert "unsafe-eval" not in csp
        scripts = csp.split("script-src ", 1)[1].split(";", 1)[0].split()
        inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
        expected = {
            "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
            for s in inline
        }
        assert set(scripts) == {"'self'", *expected}
        for src in re.findall(r'src="([^"]+)"', page.text):
            assert src.startswith("/"), src  # nothing from another origin
            assert api.get(src).status_code == 200


# --- the OpenAPI document describes the server ------------------------------------------------


def test_openapi_documents_our_error_body_and_the_configured_limits(api: httpx.Client) -> None:
    document = api.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert "ErrorBody" in schemas
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            if path not in OPEN_PATHS and not path.startswith(SIGNIN_PREFIX):
                assert "401" in responses, (method, path)
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    # A probe answers 503 with its report, the same body as its 200.
                    probe = (path, status) == ("/v1/health/ready", "503")
                    body = "/ReadinessPublic" if probe else "/ErrorBody"
                    assert ref.endswith(body), (method, path, status)
            if "requestBody" in operation:
                assert "413" in responses and "422" in responses, (method, path)
    search = schemas["SearchRequest"]
    assert search["additionalProperties"] is False
    assert search["properties"]["query"]["maxLength"] == 2000
    assert search["properties"]["k"] == {**search["properties"]["k"], "minimum": 1, "maximum": 100}
    assert schemas["ChatRequest"]["properties"]["message"]["maxLength"] == 8000
    offset = next(
        p for p in document["paths"]["/v1/memories"]["get"]["parameters"] if p["name"] == "offset"
    )
    assert offset["schema"]["maximum"] == 2147483647
