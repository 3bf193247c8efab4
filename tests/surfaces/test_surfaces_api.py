"""Surfaces over the HTTP API on a real loopback server, token mode, both database backends.

Link codes and identities, a surface token acting for a linked user (a direct message) and as
the shared-channel principal (a channel), the refusals of the act-as header, admin routes, and
thread mapping. Chat answers come from the built-in chat model over the real embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from search2o import accounts
from search2o.api.app import create_app
from search2o.runtime import Runtime
from search2o.storage.models import ApiToken, Conversation, User
from search2o.storage.surface_models import (
    LinkCode,
    SharedPrincipal,
    SurfaceIdentity,
    SurfaceThread,
)
from tests.api.test_api import add_user, assert_input_error, serve
from tests.api.test_chat_api import chat, last, of
from tests.api.test_ingress import raw_request
from tests.query.doubles import DOCS, SALARIES, ingest

pytestmark = pytest.mark.slow

SALARY_Q = "What is the salary band for level 3 engineers?"
ACT = "X-Search2o-Act-As"


@pytest.fixture
def api(token_runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(token_runtime.settings, runtime=token_runtime)) as client:
        yield client


def surface_token(runtime: Runtime, surface: str) -> str:
    with runtime.database.session() as session:
        return accounts.issue_surface_token(session, surface)


def as_surface(token: str, act_as: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if act_as is not None:
        headers[ACT] = act_as
    return headers


def link_code(api: httpx.Client, user: dict[str, str], **body: Any) -> str:
    response = api.post("/v1/surfaces/link-codes", json=body, headers=user)
    assert response.status_code == 201, response.text
    code: str = response.json()["code"]
    return code


def linked(
    api: httpx.Client, surface: str, user: dict[str, str], who: str = "U1", workspace: str = "T1"
) -> dict[str, Any]:
    body = {"workspace": workspace, "external_user_id": who, "code": link_code(api, user)}
    response = api.post("/v1/surfaces/identities", json=body, headers=as_surface(surface))
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def counts(runtime: Runtime) -> tuple[int, ...]:
    with runtime.database.session() as session:
        return tuple(
            int(session.scalar(select(func.count()).select_from(t)) or 0)
            for t in (
                User,
                ApiToken,
                LinkCode,
                SurfaceIdentity,
                SharedPrincipal,
                SurfaceThread,
                Conversation,
            )
        )


def detail(response: httpx.Response, status: int, error: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()["detail"]
    assert body["error"] == error, body
    message: str = body["message"]
    return message


def sources(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {hit["source"] for hit in response.json()["hits"]}


# --- linking ---------------------------------------------------------------------------------


def test_a_user_mints_a_code_and_the_surface_links_the_account_with_it(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    ann = add_user(token_runtime, "ann@example.com")
    slack = surface_token(token_runtime, "slack")
    minted = api.post("/v1/surfaces/link-codes", json={"surface": "slack"}, headers=ann)
    assert minted.status_code == 201, minted.text
    assert minted.json()["surface"] == "slack"
    code = minted.json()["code"]
    body = {"workspace": "T1", "external_user_id": "U1", "code": code.lower()}
    first = api.post("/v1/surfaces/identities", json=body, headers=as_surface(slack))
    assert first.status_code == 200, first.text
    assert {k: first.json()[k] for k in ("surface", "workspace", "external_user_id", "email")} == {
        "surface": "slack",
        "workspace": "T1",
        "external_user_id": "U1",
        "email": "ann@example.com",
    }
    assert first.json()["linked_by"] == "code"
    replay = api.post(
        "/v1/surfaces/identities",
        json={**body, "external_user_id": "U2"},
        headers=as_surface(slack),
    )
    assert_input_error(replay, 422, "code")
    found = api.get("/v1/surfaces/identities/T1/U1", headers=as_surface(slack))
    assert found.json() == first.json()
    assert api.get("/v1/surfaces/identities/T1/U2", headers=as_surface(slack)).status_code == 404
    # acting for ann: her (empty) conversations
    mine = api.get("/v1/conversations", headers=as_surface(slack, "user:T1:U1"))
    assert mine.status_code == 200 and mine.json() == {"conversations": []}
    # unlinked, the surface can no longer act for her
    gone = api.delete("/v1/surfaces/identities/T1/U1", headers=as_surface(slack))
    assert gone.status_code == 204
    refused = api.get("/v1/conversations", headers=as_surface(slack, "user:T1:U1"))
    detail(refused, 403, "PermissionDeniedError")
    assert api.delete("/v1/surfaces/identities/T1/U1", headers=as_surface(slack)).status_code == 404


def test_a_verified_email_links_its_user_and_an_unknown_one_links_nothing(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    add_user(token_runtime, "ann@example.com")
    slack = as_surface(surface_token(token_runtime, "slack"))
    body = {"workspace": "T1", "external_user_id": "U1", "email": "Ann@Example.com"}
    response = api.post("/v1/surfaces/identities", json=body, headers=slack)
    assert response.status_code == 200, response.text
    assert (response.json()["email"], response.json()["linked_by"]) == ("ann@example.com", "email")
    before = counts(token_runtime)
    unknown = api.post(
        "/v1/surfaces/identities",
        json={**body, "external_user_id": "U2", "email": "eve@example.com"},
        headers=slack,
    )
    assert "links with a code" in detail(unknown, 404, "NotFoundError")
    assert counts(token_runtime) == before


def test_only_the_right_callers_reach_the_link_routes(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    ann = add_user(token_runtime, "ann@example.com")
    slack = surface_token(token_runtime, "slack")
    linked(api, slack, ann)
    body = {"workspace": "T1", "external_user_id": "U9", "email": "ann@example.com"}
    before = counts(token_runtime)
    # a user's own token links nothing; a surface acting for the user mints no code
    detail(
        api.post("/v1/surfaces/identities", json=body, headers=ann), 403, "PermissionDeniedError"
    )
    acting = as_surface(slack, "user:T1:U1")
    message = detail(
        api.post("/v1/surfaces/link-codes", json={}, headers=acting), 403, "PermissionDeniedError"
    )
    assert "only the user themselves" in message
    detail(
        api.post("/v1/surfaces/link-codes", json={}, headers=as_surface(slack)),
        401,
        "AuthenticationError",
    )
    detail(api.get("/v1/surfaces/identities/T1/U1", headers=ann), 403, "PermissionDeniedError")
    assert counts(token_runtime) == before


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/surfaces/link-codes", {"minutes": 0}, "minutes"),
        ("/v1/surfaces/link-codes", {"minutes": 1441}, "minutes"),
        ("/v1/surfaces/link-codes", {"minutes": "15"}, "minutes"),
        ("/v1/surfaces/link-codes", {"surface": "Slack"}, "surface"),
        ("/v1/surfaces/link-codes", {"surface": "sl\u0000"}, "surface"),
        ("/v1/surfaces/link-codes", {"colour": "red"}, "colour"),
        ("/v1/surfaces/identities", {"workspace": "T1", "external_user_id": "U1"}, "body"),
        (
            "/v1/surfaces/identities",
            {"workspace": "T1", "external_user_id": "U1", "code": "x", "email": "a@b.c"},
            "body",
        ),
        (
            "/v1/surfaces/identities",
            {"workspace": "T:1", "external_user_id": "U1", "code": "x"},
            "workspace",
        ),
        (
            "/v1/surfaces/identities",
            {"workspace": "T1", "external_user_id": "", "code": "x"},
            "external_user_id",
        ),
        (
            "/v1/surfaces/identities",
            {"workspace": "T1", "external_user_id": "U1", "code": "ABC"},
            "code",
        ),
        (
            "/v1/surfaces/identities",
            {"workspace": "T1", "external_user_id": "U1", "email": "not-an-email"},
            "email",
        ),
    ],
)
def test_bad_link_requests_name_the_field_and_change_nothing(
    token_runtime: Runtime, api: httpx.Client, path: str, body: dict[str, Any], field: str
) -> None:
    headers = (
        add_user(token_runtime, "ann@example.com")
        if path.endswith("link-codes")
        else as_surface(surface_token(token_runtime, "slack"))
    )
    before = counts(token_runtime)
    response = api.post(path, json=body, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["field"].split(".")[-1] == field, response.json()
    assert counts(token_runtime) == before


# --- acting ----------------------------------------------------------------------------------


def test_a_direct_message_reads_the_users_hr_documents_and_a_channel_never_does(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    ingest(token_runtime, DOCS)
    ingest(token_runtime, {"salaries.md": SALARIES}, groups=["hr"])
    ann = add_user(token_runtime, "ann@example.com", groups=("hr",))
    slack = surface_token(token_runtime, "slack")
    linked(api, slack, ann)
    dm, channel = as_surface(slack, "user:T1:U1"), as_surface(slack, "shared:T1")

    query = {"query": SALARY_Q, "k": 10}
    assert "upload:salaries.md" in sources(api.post("/v1/search", json=query, headers=dm))
    shared_hits = sources(api.post("/v1/search", json=query, headers=channel))
    assert shared_hits and "upload:salaries.md" not in shared_hits  # open documents only
    listed = {d["source"] for d in api.get("/v1/documents", headers=channel).json()}
    assert listed == {"upload:vacation.md", "upload:parking.md"}
    assert "upload:salaries.md" in {
        d["source"] for d in api.get("/v1/documents", headers=dm).json()
    }

    _, in_dm = chat(api, SALARY_Q, headers=dm)
    assert "upload:salaries.md" in {c["source"] for c in of(in_dm, "citation")}
    assert "compensation committee" in last(in_dm)["text"]
    _, in_channel = chat(api, SALARY_Q, headers=channel)
    answer = last(in_channel)
    assert "upload:salaries.md" not in {c["source"] for c in of(in_channel, "citation")}
    assert "salaries.md" not in str(answer["citations"])
    assert "compensation committee" not in answer["text"] and "confidential" not in answer["text"]

    # the channel's conversation is the shared principal's, not ann's, and the other way round
    theirs = in_channel[0].data["conversation_id"]
    ours = in_dm[0].data["conversation_id"]
    assert api.get(f"/v1/conversations/{theirs}", headers=ann).status_code == 404
    assert api.get(f"/v1/conversations/{ours}", headers=channel).status_code == 404
    assert api.get(f"/v1/conversations/{ours}", headers=ann).status_code == 200
    listed = api.get("/v1/conversations", headers=channel).json()["conversations"]
    assert [c["id"] for c in listed] == [theirs]


def test_a_surface_acts_only_for_accounts_linked_on_it(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    ann = add_user(token_runtime, "ann@example.com")
    slack = surface_token(token_runtime, "slack")
    telegram = surface_token(token_runtime, "telegram")
    linked(api, slack, ann)
    before = counts(token_runtime)
    cross = api.get("/v1/conversations", headers=as_surface(telegram, "user:T1:U1"))
    unlinked = api.get("/v1/conversations", headers=as_surface(telegram, "user:T1:U7"))
    message = detail(cross, 403, "PermissionDeniedError")
    assert "not linked to a user on telegram" in message
    assert detail(unlinked, 403, "PermissionDeniedError") == message.replace("U1", "U7")
    assert "X-Search2o-Act-As" in detail(
        api.get("/v1/conversations", headers=as_surface(slack)), 401, "AuthenticationError"
    )
    malformed = api.get("/v1/conversations", headers=as_surface(slack, "user:T1"))
    assert_input_error(malformed, 422, ACT)
    twice = api.get(
        "/v1/conversations",
        headers=[("Authorization", f"Bearer {slack}"), (ACT, "user:T1:U1"), (ACT, "shared:T1")],
    )
    assert_input_error(twice, 422, ACT)
    # a user's own token may not name someone else
    assert "only a surface" in detail(
        api.get("/v1/conversations", headers={**ann, ACT: "user:T1:U1"}),
        403,
        "PermissionDeniedError",
    )
    assert counts(token_runtime) == before
    # a revoked surface token is refused like any other
    with token_runtime.database.session() as session:
        accounts.revoke_token(session, slack)
    detail(
        api.get("/v1/conversations", headers=as_surface(slack, "user:T1:U1")),
        401,
        "AuthenticationError",
    )


def test_a_surface_token_never_has_admin_rights_even_for_an_admin(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    ids = ingest(token_runtime, DOCS)
    boss = add_user(token_runtime, "boss@example.com", admin=True)
    slack = surface_token(token_runtime, "slack")
    linked(api, slack, boss)
    document = f"/v1/documents/{ids['vacation.md']}"
    upload = {"files": ("x.md", b"# X\n\nSome text about nothing.\n", "text/markdown")}
    for acting in ("user:T1:U1", "shared:T1"):
        headers = as_surface(slack, acting)
        detail(api.delete(document, headers=headers), 403, "PermissionDeniedError")
        detail(api.get("/v1/agents/travel", headers=headers), 403, "PermissionDeniedError")
        detail(
            api.post("/v1/documents", files=upload, headers=headers), 403, "PermissionDeniedError"
        )
    assert len(api.get("/v1/documents", headers=boss).json()) == 2  # nothing was deleted
    # the control: the admin's own token has the rights
    assert api.get("/v1/agents/travel", headers=boss).status_code == 404
    assert api.delete(document, headers=boss).status_code == 200


def test_a_refused_act_as_header_is_answered_before_the_body_is_read(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    slack = surface_token(token_runtime, "slack")
    head = (
        "POST /v1/chat HTTP/1.1\nHost: localhost\ncontent-type: application/json\n"
        f"authorization: Bearer {slack}\ncontent-length: {200 * 1024 * 1024}\n"
    )
    assert raw_request(api, head + f"{ACT}: user:T1:U1\n")[0] == 403  # 200 MiB announced
    assert raw_request(api, head + f"{ACT}: nobody\n")[0] == 422
    # a valid surface token naming nobody is a known caller: bounded like any other
    assert raw_request(api, head)[0] == 413


# --- threads ---------------------------------------------------------------------------------


def test_a_channel_thread_continues_the_shared_principals_conversation(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    ingest(token_runtime, DOCS)
    ann = add_user(token_runtime, "ann@example.com")
    slack = surface_token(token_runtime, "slack")
    linked(api, slack, ann)
    channel, dm = as_surface(slack, "shared:T1"), as_surface(slack, "user:T1:U1")
    thread = "/v1/surfaces/threads/T1/C1/1700000000.123456"
    assert api.get(thread, headers=channel).status_code == 404
    _, events = chat(api, "How many vacation days do we get?", headers=channel)
    conversation_id = events[0].data["conversation_id"]
    put = api.put(thread, json={"conversation_id": conversation_id}, headers=channel)
    assert put.status_code == 200, put.text
    assert put.json() == {
        "surface": "slack",
        "workspace": "T1",
        "channel": "C1",
        "thread": "1700000000.123456",
        "conversation_id": conversation_id,
        "created": True,
    }
    found = api.get(thread, headers=channel)
    assert found.json() == {**put.json(), "created": False}
    _, follow_up = chat(api, "and the sick leave?", conversation_id, headers=channel)
    assert last(follow_up)["conversation_id"] == conversation_id

    before = counts(token_runtime)
    # the thread is not ann's: unmapped for her, and she cannot take it over
    assert api.get(thread, headers=dm).status_code == 404
    _, hers = chat(api, "hello", headers=dm)
    taken = api.put(thread, json={"conversation_id": hers[0].data["conversation_id"]}, headers=dm)
    detail(taken, 409, "ConflictError")
    # nor map a thread to a conversation that is not hers (like a missing one)
    other = api.put(
        "/v1/surfaces/threads/T1/D1/1", json={"conversation_id": conversation_id}, headers=dm
    )
    detail(other, 404, "NotFoundError")
    detail(api.get(thread, headers=as_surface(slack)), 401, "AuthenticationError")
    detail(api.get(thread, headers=ann), 403, "PermissionDeniedError")
    assert_input_error(api.get("/v1/surfaces/threads/T1/C%201/1", headers=dm), 422, "channel")
    bad = api.put(thread, json={"conversation_id": 7}, headers=dm)
    assert bad.status_code == 422 and bad.json()["detail"]["field"] == "conversation_id"
    after = counts(token_runtime)
    assert after[:6] == before[:6] and after[6] == before[6] + 1  # only ann's "hello"
