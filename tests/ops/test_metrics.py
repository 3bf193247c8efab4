"""``GET /metrics``: who may scrape, and that the counters move with real requests and answers.

The metrics of one process are shared by every app in it (:func:`process_metrics`), so each
test compares a scrape before with one after what it does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError

from search2o.api.app import create_app
from search2o.config import Settings
from search2o.observability import (
    surface_acknowledged,
    surface_duplicate_dropped,
    surface_rate_limited,
)
from search2o.observability.settings import MetricsSettings
from search2o.runtime import Runtime
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder
from tests.ops.conftest import streamed_chat, value

pytestmark = pytest.mark.slow

CANARY = "zebra-canary-4471 where is the parking garage?"
TOKEN = "scrape-token-0123456789"


@pytest.fixture
def api(runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


def scrape(client: httpx.Client, **headers: str) -> str:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text


def test_requests_are_counted_per_route_template(api: httpx.Client) -> None:
    before = scrape(api)
    missing = "3f9c1a5e-0000-4000-8000-000000000000"
    status = api.delete(f"/v1/documents/{missing}").status_code
    assert status in (404, 422)
    assert api.get("/v1/no-such-route/abc").status_code == 404
    after = scrape(api)
    route = "/v1/documents/{document_id}"
    labels = {"method": "DELETE", "route": route, "status": str(status)}
    assert value(after, "search2o_http_requests_total", **labels) == (
        value(before, "search2o_http_requests_total", **labels) + 1
    )
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert value(after, "search2o_http_requests_total", **unmatched) >= (
        value(before, "search2o_http_requests_total", **unmatched) + 1
    )
    duration = {"method": "DELETE", "route": route}
    assert value(after, "search2o_http_request_duration_seconds_count", **duration) == (
        value(before, "search2o_http_request_duration_seconds_count", **duration) + 1
    )
    # Ids and raw paths never become labels: the number of series stays bounded.
    assert missing not in after and "no-such-route" not in after


def test_a_streamed_answer_moves_the_answer_metrics(api: httpx.Client) -> None:
    before = scrape(api)
    events = streamed_chat(api, CANARY)
    assert events[0] == "conversation" and events[-1] == "done", events
    after = scrape(api)
    for name in ("search2o_chat_first_token_seconds_count", "search2o_chat_answer_seconds_count"):
        assert value(after, name, kind="turn") == value(before, name, kind="turn") + 1, name
    assert value(after, "search2o_chat_model_seconds_count") == (
        value(before, "search2o_chat_model_seconds_count") + 1
    )
    stream = {"method": "POST", "route": "/v1/chat", "status": "200"}
    assert value(after, "search2o_http_requests_total", **stream) == (
        value(before, "search2o_http_requests_total", **stream) + 1
    )
    assert value(after, "search2o_sse_streams_open") == value(before, "search2o_sse_streams_open")
    assert "zebra-canary" not in after  # no user content in a scrape


def test_queue_depth_and_oldest_job_come_from_the_ledger(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    no_consumer = settings.jobs.model_copy(update={"server_workers": 0})
    chosen = settings.model_copy(update={"jobs": no_consumer})
    with Runtime(chosen, embedder=embedder) as rt:
        rt.jobs.enqueue("state.compact", {"conversation": "c-1"})
        rt.jobs.enqueue("state.compact", {"conversation": "c-2"})
        with serve(create_app(chosen, runtime=rt)) as client:
            text = scrape(client)
    assert value(text, "search2o_jobs_ledger_up") == 1
    assert value(text, "search2o_jobs", kind="state.compact", state="queued") == 2
    assert value(text, "search2o_job_oldest_queued_seconds", kind="state.compact") > 0


def test_a_token_protects_the_scrape_from_any_address(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    chosen = settings.model_copy(update={"metrics": MetricsSettings(token=TOKEN)})
    with Runtime(chosen, embedder=embedder) as rt, serve(create_app(chosen, runtime=rt)) as c:
        missing = c.get("/metrics")
        wrong = c.get("/metrics", headers={"Authorization": "Bearer " + "x" * len(TOKEN)})
        basic = c.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"})
        right = c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    for refused in (missing, wrong, basic):
        assert refused.status_code == 401, refused.text
        assert refused.json()["detail"]["error"] == "AuthenticationError"
        assert TOKEN not in refused.text
    assert right.status_code == 200 and "search2o_http_requests_total" in right.text


def _scrape_from(app: object, peer: str, **headers: str) -> httpx.Response:
    """Scrape ``app`` in process as if from ``peer`` (the ASGI scope's client address)."""

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(peer, 40000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://search2o") as c:
            return await c.get("/metrics", headers=headers)

    return asyncio.run(ask())


def test_without_a_token_only_loopback_peers_scrape(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    with Runtime(settings, embedder=embedder) as rt:
        app = create_app(settings, runtime=rt)
        remote = _scrape_from(app, "192.0.2.7")
        local = _scrape_from(app, "127.0.0.1")
    assert remote.status_code == 401, remote.text
    assert "SEARCH2O_METRICS__TOKEN" in remote.json()["detail"]["message"]
    assert local.status_code == 200


def test_metrics_can_be_turned_off(settings: Settings, embedder: MemoEmbedder) -> None:
    chosen = settings.model_copy(update={"metrics": MetricsSettings(enabled=False)})
    with Runtime(chosen, embedder=embedder) as rt, serve(create_app(chosen, runtime=rt)) as c:
        off = c.get("/metrics")
        openapi = c.get("/openapi.json").json()
    assert off.status_code == 404 and "metrics.enabled" in off.text
    assert "/metrics" not in openapi["paths"]  # for scrapers, not the API's clients


def test_a_short_metrics_token_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"metrics\.token must be at least 16 characters"):
        MetricsSettings(token="short-token")


def test_surfaces_report_acknowledgements_duplicates_and_429s(api: httpx.Client) -> None:
    before = scrape(api)
    surface_acknowledged("slack", 0.12)
    surface_duplicate_dropped("slack")
    surface_duplicate_dropped("slack")
    surface_rate_limited("telegram")
    after = scrape(api)
    moved = {
        ("search2o_surface_ack_seconds_count", "slack"): 1,
        ("search2o_surface_duplicates_dropped_total", "slack"): 2,
        ("search2o_surface_rate_limited_total", "telegram"): 1,
    }
    for (name, surface), by in moved.items():
        assert value(after, name, surface=surface) == value(before, name, surface=surface) + by
    for bad in ("Slack", "team T01/channel", "", "x" * 40):
        with pytest.raises(ValueError, match="surface name"):
            surface_duplicate_dropped(bad)
    assert "T01" not in scrape(api)  # a refused name adds no series


def test_requests_refused_before_routing_keep_their_route(token_api: httpx.Client) -> None:
    before = scrape(token_api)
    assert token_api.get("/v1/documents").status_code == 401
    missing = "0123456789abcdef0123456789abcdef"
    assert token_api.get(f"/v1/jobs/{missing}").status_code == 401
    after = scrape(token_api)
    for route in ("/v1/documents", "/v1/jobs/{job_id}"):
        labels = {"method": "GET", "route": route, "status": "401"}
        assert value(after, "search2o_http_requests_total", **labels) == (
            value(before, "search2o_http_requests_total", **labels) + 1
        ), route
    assert missing not in after
