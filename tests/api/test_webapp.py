"""The Web App is served at / under a strict CSP, with history fallback, without touching the
API's own answers (404s and 405s stay JSON)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from search2o.api.app import create_app
from search2o.api.headers import API_CSP
from search2o.api.webapp import APP_CSP, WebApp
from search2o.runtime import Runtime
from tests.api.test_api import serve

EXPECTED_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; manifest-src 'self'; frame-ancestors 'self'; "
    "base-uri 'none'; form-action 'self'; object-src 'none'"
)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html><title>app</title>")
    (tmp_path / "assets" / "index-abc123.js").write_text("console.log(1)")
    return tmp_path


def small_app(dist: Path) -> TestClient:
    app = FastAPI()

    @app.post("/v1/thing")
    def thing() -> dict[str, str]:
        return {"ok": "yes"}

    app.add_middleware(WebApp, router=app.router, dist=dist)
    return TestClient(app)


def test_app_pages_carry_the_strict_policy(built: Path) -> None:
    client = small_app(built)
    assert APP_CSP == EXPECTED_CSP
    for path in ("/", "/c/0123456789abcdef0123456789abcdef", "/admin/documents", "/x/y/z"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert page.text.startswith("<!doctype html>")
        assert page.headers["content-security-policy"] == EXPECTED_CSP
        assert page.headers["cache-control"] == "no-cache"
    asset = client.get("/assets/index-abc123.js")
    assert asset.status_code == 200 and asset.text == "console.log(1)"
    assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert client.get("/assets/missing.js").status_code == 404
    # A path an API route knows is the API's: GET on a POST-only route stays 405.
    assert client.get("/v1/thing").status_code == 405
    assert client.post("/v1/thing").json() == {"ok": "yes"}
    # Only GET and HEAD reach the app.
    assert client.post("/somewhere").status_code == 404
    # Nothing under /v1/ is the app, routed or not.
    assert client.get("/v1/unknown").status_code == 404
    assert not client.get("/v1/unknown").text.startswith("<!doctype")


def test_without_a_build_the_app_says_how_to_build_it(tmp_path: Path) -> None:
    client = small_app(tmp_path / "nothing")
    page = client.get("/")
    assert page.status_code == 503
    assert "npm ci" in page.text
    assert page.headers["content-security-policy"] == EXPECTED_CSP


def test_the_real_app_serves_the_web_app_and_keeps_api_answers(runtime: Runtime) -> None:
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        check_real_app(client)


def check_real_app(local_api: httpx.Client) -> None:
    page = local_api.get("/c/0123456789abcdef0123456789abcdef")
    assert page.headers["content-security-policy"] == EXPECTED_CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.status_code in (200, 503)  # 503 only in a checkout where the app is not built
    unknown = local_api.get("/v1/no-such-thing")
    assert unknown.status_code == 404
    assert unknown.headers["content-type"].startswith("application/json")
    assert unknown.headers["content-security-policy"] == API_CSP
    assert local_api.get("/v1/chat").status_code == 405
    assert local_api.get("/docs").status_code == 200
    assert local_api.get("/openapi.json").json()["paths"]["/v1/me"]


def test_the_web_app_sends_its_client_header_on_every_request() -> None:
    # The one fetch wrapper (and the upload path) sets it; nothing else calls fetch.
    source = Path(__file__).resolve().parents[2] / "web" / "src"
    calls = [
        p.relative_to(source).as_posix()
        for p in source.rglob("*.ts*")
        if re.search(r"(?<![\w.])fetch\(|XMLHttpRequest\(", p.read_text())
    ]
    assert calls == ["api/client.ts"]
    client = (source / "api" / "client.ts").read_text()
    assert '"X-Search2o-Client": "web"' in client
    # Same-origin with cookies unless the browser extension set a remote server, which gets
    # no cookies (its own headers carry its device token, from extension/src/connect.ts).
    assert client.count('"same-origin"') == 1
    assert client.count('credentials: remote ? "omit" : "same-origin"') == 1
    assert "localStorage" not in client and "Authorization" not in client
