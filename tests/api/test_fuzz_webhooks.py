"""Fuzzing of the routes that are not in the OpenAPI document: the surfaces' webhooks and MCP.

``/slack/events``, ``/slack/interactions``, ``/telegram/webhook``, ``/mattermost/command``,
``/mattermost/actions`` and ``/mcp`` speak their vendor's wire format (Slack's signed Events API
and interactivity payloads, Telegram's ``Update``, Mattermost's slash command form and
integration actions, MCP's JSON-RPC over Streamable HTTP), not our API: they stay out of our
OpenAPI document (its clients would only be misled by them), so schemathesis
(``tests/api/test_schemathesis.py``) cannot reach them. Hypothesis does instead: it generates
bodies shaped like each format with arbitrary values in every field, and each body carries a
*valid* signature or secret (Slack's v0 HMAC over the raw bytes, Telegram's secret token
header, Mattermost's command token and our HMAC in an action's context, a user's bearer token
for MCP), so the fuzz gets past verification into the parsing and the pipeline behind it.
Asserted for every body: no server error, and only the statuses the route documents.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from search2o.runtime import Runtime
from search2o.surfaces.mattermost.buttons import _signature, button_key
from tests.api.test_api import add_user, serve
from tests.surfaces.mattermost.conftest import (  # noqa: F401 (fixtures)
    MattermostFactory,
    fake_mattermost,
    mattermost_env,
)
from tests.surfaces.mattermost.fake_mattermost import BOT_TOKEN as MM_BOT_TOKEN
from tests.surfaces.mattermost.fake_mattermost import COMMAND_TOKEN
from tests.surfaces.slack.conftest import SECRET as SLACK_SECRET
from tests.surfaces.slack.conftest import SlackFactory, slack_env  # noqa: F401 (fixture)
from tests.surfaces.slack.fake_slack import signed
from tests.surfaces.telegram.conftest import SECRET as TELEGRAM_SECRET
from tests.surfaces.telegram.conftest import (  # noqa: F401 (fixture)
    TelegramFactory,
    telegram_env,
)
from tests.surfaces.telegram.fake_telegram import SECRET_HEADER

pytestmark = pytest.mark.slow

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same bodies every run: a failure can be replayed
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
ANY_JSON = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
ID = st.text(max_size=20) | st.integers() | st.none()


def _no_server_error(response: httpx.Response, allowed: set[int], seen: Counter[int]) -> None:
    assert response.status_code < 500, response.text[:500]
    assert response.status_code in allowed, (response.status_code, response.text[:500])
    seen[response.status_code] += 1


SLACK_EVENT = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["event_callback", "url_verification", "app_rate_limited"])
        | st.text(max_size=20),
        "team_id": ID,
        "event_id": ID,
        "challenge": ID,
        "event": st.fixed_dictionaries(
            {
                "type": st.sampled_from(["message", "app_mention"]) | st.text(max_size=10),
                "user": ID,
                "text": st.text(max_size=200),
                "channel": ID,
                "ts": ID,
                "thread_ts": ID,
                "channel_type": st.sampled_from(["im", "channel"]) | ID,
            },
            optional={"bot_id": ID, "subtype": ID, "blocks": ANY_JSON},
        )
        | ANY_JSON,
    },
    optional={"authorizations": ANY_JSON, "retry_attempt": ID},
)
SLACK_ACTION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["block_actions", "view_submission"]) | st.text(max_size=20),
        "team": st.fixed_dictionaries({"id": ID}) | ANY_JSON,
        "user": st.fixed_dictionaries({"id": ID}) | ANY_JSON,
        "actions": st.lists(
            st.fixed_dictionaries({"action_id": ID, "value": ID}) | ANY_JSON, max_size=3
        )
        | ANY_JSON,
        "container": ANY_JSON,
        "message": ANY_JSON,
    }
)


def test_slack_events_with_valid_signatures(
    slack_env: SlackFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = slack_env()
    seen: Counter[int] = Counter()

    @FUZZ
    @given(body=SLACK_EVENT | ANY_JSON)
    def events(body: Any) -> None:
        raw = json.dumps(body).encode()
        response = env.http.post("/slack/events", content=raw, headers=signed(SLACK_SECRET, raw))
        _no_server_error(response, {200, 400, 413, 422}, seen)

    events()
    assert seen[200] > 0, seen  # the signatures were good: some bodies got through


def test_slack_interactions_with_valid_signatures(
    slack_env: SlackFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = slack_env()
    seen: Counter[int] = Counter()

    @FUZZ
    @given(payload=SLACK_ACTION | ANY_JSON)
    @example(payload={"type": "block_actions", "team": ["T1"]})  # what a run found: a 500
    def interactions(payload: Any) -> None:
        raw = str(httpx.QueryParams({"payload": json.dumps(payload)})).encode()
        headers = signed(SLACK_SECRET, raw, content_type="application/x-www-form-urlencoded")
        response = env.http.post("/slack/interactions", content=raw, headers=headers)
        _no_server_error(response, {200, 400, 413, 422}, seen)

    interactions()
    assert seen[200] > 0, seen


def test_a_slack_interaction_whose_team_is_a_list_is_not_a_server_error(
    slack_env: SlackFactory,  # noqa: F811 (the imported fixture)
) -> None:
    """The smallest body the fuzz found (it was a 500): ``team`` a list is ignored, not an error."""
    env = slack_env()
    raw = str(httpx.QueryParams({"payload": json.dumps({"type": "block_actions", "team": ["T1"]})}))
    headers = signed(SLACK_SECRET, raw.encode(), content_type="application/x-www-form-urlencoded")
    response = env.http.post("/slack/interactions", content=raw.encode(), headers=headers)
    assert response.status_code in (200, 400, 422), response.text


TELEGRAM_UPDATE = st.fixed_dictionaries(
    {
        "update_id": st.integers(min_value=-(2**40), max_value=2**40) | ID,
    },
    optional={
        "message": st.fixed_dictionaries(
            {
                "message_id": ID,
                "chat": st.fixed_dictionaries({"id": ID, "type": ID}) | ANY_JSON,
                "from": st.fixed_dictionaries({"id": ID, "is_bot": LEAF}) | ANY_JSON,
                "text": st.text(max_size=300) | LEAF,
                "date": ID,
            },
            optional={"entities": ANY_JSON, "reply_to_message": ANY_JSON},
        )
        | ANY_JSON,
        "callback_query": ANY_JSON,
        "edited_message": ANY_JSON,
    },
)


def test_telegram_webhook_with_the_secret_token(
    telegram_env: TelegramFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = telegram_env()
    seen: Counter[int] = Counter()

    @FUZZ
    @given(body=TELEGRAM_UPDATE | ANY_JSON)
    def webhook(body: Any) -> None:
        response = env.http.post(
            "/telegram/webhook",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", SECRET_HEADER: TELEGRAM_SECRET},
        )
        _no_server_error(response, {200, 400, 413, 422}, seen)

    webhook()
    assert seen[200] > 0, seen


MATTERMOST_COMMAND = st.fixed_dictionaries(
    {
        "token": st.just(COMMAND_TOKEN),
        "text": st.text(max_size=200),
        "user_id": st.text(max_size=30),
        "channel_id": st.text(max_size=30),
        "team_id": st.text(max_size=30),
        "command": st.sampled_from(["/search2o"]) | st.text(max_size=20),
    },
    optional={"user_name": st.text(max_size=20), "response_url": st.text(max_size=60)},
)


def test_mattermost_command_and_actions_with_valid_tokens(
    mattermost_env: MattermostFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = mattermost_env()
    key = button_key(MM_BOT_TOKEN)
    seen: Counter[int] = Counter()

    @FUZZ
    @given(form=MATTERMOST_COMMAND)
    def command(form: dict[str, str]) -> None:
        response = env.http.post("/mattermost/command", data=form)
        _no_server_error(response, {200, 400, 413, 422}, seen)

    @FUZZ
    @given(
        delivery=st.integers(min_value=-(2**40), max_value=2**40),
        rating=st.sampled_from(["up", "down"]),
        user=st.text(max_size=30) | ID,
        extra=ANY_JSON,
    )
    def actions(delivery: int, rating: str, user: Any, extra: Any) -> None:
        context = {"delivery": delivery, "rating": rating, "sig": _signature(key, delivery, rating)}
        body = {"user_id": user, "context": context, "post_id": extra, "channel_id": extra}
        response = env.http.post("/mattermost/actions", json=body)
        _no_server_error(response, {200, 400, 404, 413, 422}, seen)

    command()
    actions()
    assert seen[200] > 0, seen


MCP_REQUEST = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0") | LEAF,
        "id": st.integers(min_value=0, max_value=2**31) | st.text(max_size=10) | st.none(),
        "method": st.sampled_from(
            ["initialize", "tools/list", "tools/call", "ping", "resources/list"]
        )
        | st.text(max_size=20),
        "params": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["search", "fetch", "search_knowledge"])
                | st.text(max_size=20),
                "arguments": st.fixed_dictionaries(
                    {"query": st.text(max_size=200) | LEAF, "id": st.text(max_size=40) | LEAF}
                )
                | ANY_JSON,
            }
        )
        | ANY_JSON,
    }
)


def test_mcp_with_a_valid_token(token_runtime: Runtime) -> None:
    from search2o.api.app import create_app

    auth = add_user(token_runtime, "ann@example.com")
    headers = {**auth, "Accept": "application/json, text/event-stream"}
    seen: Counter[int] = Counter()
    with serve(create_app(token_runtime.settings, runtime=token_runtime)) as client:

        @FUZZ
        @given(body=MCP_REQUEST | ANY_JSON)
        def mcp(body: Any) -> None:
            response = client.post(
                "/mcp",
                content=json.dumps(body).encode(),
                headers={**headers, "Content-Type": "application/json"},
            )
            _no_server_error(response, {200, 202, 400, 404, 406, 413, 415, 422}, seen)

        mcp()
    assert seen[200] > 0, seen
