"""Admins add, change and remove users; a change applies from the user's next request, and the
last admin can be neither demoted nor removed — on both backends, through a real server."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select

from search2o.runtime import Runtime
from search2o.storage.models import Conversation
from tests.api.test_api import add_user, assert_input_error
from tests.api.test_signin import browser, sessions, sign_in


def _users(api: httpx.Client, admin: dict[str, str]) -> dict[str, dict[str, Any]]:
    listed = api.get("/v1/users", headers=admin)
    assert listed.status_code == 200, listed.text
    return {u["email"]: u for u in listed.json()["users"]}


def test_an_admin_changes_groups_admin_flag_and_plan(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    ann = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com", ("eng",))
    body = {"groups": ["hr", "hr", "ops"], "plan": "paid"}
    changed = token_api.patch("/v1/users/Bob@example.com", json=body, headers=ann)
    assert changed.status_code == 200, changed.text
    assert (changed.json()["groups"], changed.json()["plan"]) == (["hr", "ops"], "paid")
    me = token_api.get("/v1/me", headers=bob).json()  # bob's next request sees it
    assert (me["groups"], me["plan"], me["is_admin"]) == (["hr", "ops"], "paid", False)
    assert token_api.get("/v1/users", headers=bob).status_code == 403
    promoted = token_api.patch("/v1/users/bob@example.com", json={"is_admin": True}, headers=ann)
    assert promoted.json()["is_admin"] is True
    assert token_api.get("/v1/users", headers=bob).status_code == 200
    # bad input names the field and changes nothing
    before = _users(token_api, ann)
    for body, field in [
        ({}, "body"),
        ({"groups": ["h r"]}, "groups"),
        ({"plan": "gold"}, "plan"),
        ({"is_admin": "yes"}, "is_admin"),
        ({"email": "x@example.com"}, "email"),
    ]:
        response = token_api.patch("/v1/users/bob@example.com", json=body, headers=ann)
        assert_input_error(response, 422, field)
    assert _users(token_api, ann) == before
    missing = token_api.patch("/v1/users/ghost@example.com", json={"plan": "paid"}, headers=ann)
    assert missing.status_code == 404
    plain = add_user(token_runtime, "cy@example.com")
    refused = token_api.patch("/v1/users/cy@example.com", json={"is_admin": True}, headers=plain)
    assert refused.status_code == 403
    assert _users(token_api, ann)["cy@example.com"]["is_admin"] is False


def test_an_admin_adds_a_user(token_runtime: Runtime, token_api: httpx.Client) -> None:
    ann = add_user(token_runtime, "ann@example.com", admin=True)
    body = {"email": "Dee@Example.com", "groups": ["hr"], "plan": "paid"}
    added = token_api.post("/v1/users", json=body, headers=ann)
    assert added.status_code == 201, added.text
    assert _users(token_api, ann)["dee@example.com"]["groups"] == ["hr"]
    again = token_api.post("/v1/users", json={"email": "dee@example.com"}, headers=ann)
    assert again.status_code == 409
    assert_input_error(
        token_api.post("/v1/users", json={"email": "nobody"}, headers=ann), 422, "email"
    )
    assert sorted(_users(token_api, ann)) == ["ann@example.com", "dee@example.com"]


def test_removal_and_demotion_take_effect_on_the_next_request(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    ann = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com", admin=True)
    cookie = sign_in(token_api, token_runtime, "bob@example.com")
    bob_browser = browser(token_api, cookie)
    assert token_api.get("/v1/users", headers=bob_browser).status_code == 200
    chat = token_api.post("/v1/chat", json={"message": "hello!", "stream": False}, headers=bob)
    assert chat.status_code == 200
    demoted = token_api.patch("/v1/users/bob@example.com", json={"is_admin": False}, headers=ann)
    assert demoted.status_code == 200
    for headers in (bob, bob_browser):
        assert token_api.get("/v1/users", headers=headers).status_code == 403
        assert token_api.get("/v1/me", headers=headers).json()["is_admin"] is False
    removed = token_api.delete("/v1/users/bob@example.com", headers=ann)
    assert removed.status_code == 204
    for headers in (bob, bob_browser):
        assert token_api.get("/v1/me", headers=headers).status_code == 401
    assert sessions(token_runtime) == 0
    with token_runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(Conversation)) == 0
    assert sorted(_users(token_api, ann)) == ["ann@example.com"]
    assert token_api.delete("/v1/users/bob@example.com", headers=ann).status_code == 404


def test_the_last_admin_can_be_neither_demoted_nor_removed(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    ann = add_user(token_runtime, "ann@example.com", admin=True)
    add_user(token_runtime, "bob@example.com")
    for response in (
        token_api.patch("/v1/users/ann@example.com", json={"is_admin": False}, headers=ann),
        token_api.delete("/v1/users/ann@example.com", headers=ann),
    ):
        assert response.status_code == 409, response.text
        assert "ann@example.com is the last admin" in response.json()["detail"]["message"]
    assert _users(token_api, ann)["ann@example.com"]["is_admin"] is True
    # with a second admin, ann may step down herself
    token_api.patch("/v1/users/bob@example.com", json={"is_admin": True}, headers=ann)
    stepped = token_api.patch("/v1/users/ann@example.com", json={"is_admin": False}, headers=ann)
    assert stepped.status_code == 200
    assert token_api.get("/v1/users", headers=ann).status_code == 403
