"""``/v1/me/tokens``: a user creates, lists and revokes their own device tokens.

A real server on loopback over both database backends, in token mode (two users) and in local
mode (the token is local-only).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import func, select

from search2o import accounts
from search2o.api.app import create_app
from search2o.config import Settings
from search2o.errors import AuthenticationError
from search2o.own_tokens import MAX_ACTIVE_TOKENS
from search2o.runtime import Runtime
from search2o.storage.models import ApiToken
from tests.api.test_api import add_user, assert_input_error, assert_validation_error, serve
from tests.conftest import MemoEmbedder
from tests.query.doubles import open_runtime


@pytest.fixture
def token_api(settings: Settings, embedder: MemoEmbedder) -> Iterator[tuple[Runtime, httpx.Client]]:
    with (
        open_runtime(settings, embedder, auth_mode="token") as rt,
        serve(create_app(rt.settings, runtime=rt)) as client,
    ):
        yield rt, client


def _tokens(runtime: Runtime) -> int:
    with runtime.database.session() as session:
        return int(session.scalar(select(func.count()).select_from(ApiToken)) or 0)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_device_token_works_until_its_owner_revokes_it(
    token_api: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = token_api
    ann = add_user(runtime, "ann@example.com")
    created = api.post("/v1/me/tokens", json={"name": "laptop extension"}, headers=ann)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == "laptop extension" and body["local_only"] is False
    assert body["token"].startswith(body["prefix"]) and not body["revoked"]
    device = bearer(body["token"])
    assert api.get("/v1/me", headers=device).json()["email"] == "ann@example.com"

    listed = api.get("/v1/me/tokens", headers=device).json()["tokens"]
    assert [t["name"] for t in listed] == ["laptop extension", "tests"]  # newest first
    assert all("token" not in t for t in listed)  # never a secret

    assert api.delete(f"/v1/me/tokens/{body['id']}", headers=ann).status_code == 204
    assert api.get("/v1/me", headers=device).status_code == 401
    listed = api.get("/v1/me/tokens", headers=ann).json()["tokens"]
    assert [t["revoked"] for t in listed] == [True, False]
    again = api.delete(f"/v1/me/tokens/{body['id']}", headers=ann)
    assert again.status_code == 404  # revoked already: no active token of that id


def test_another_users_token_is_answered_like_a_missing_one(
    token_api: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = token_api
    ann = add_user(runtime, "ann@example.com")
    bob = add_user(runtime, "bob@example.com")
    token = api.post("/v1/me/tokens", json={"name": "ann's"}, headers=ann).json()
    theirs = api.delete(f"/v1/me/tokens/{token['id']}", headers=bob)
    missing = api.delete("/v1/me/tokens/99999", headers=bob)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"]["error"] == missing.json()["detail"]["error"]
    assert api.get("/v1/me", headers=bearer(token["token"])).status_code == 200  # untouched
    assert [t["name"] for t in api.get("/v1/me/tokens", headers=bob).json()["tokens"]] == ["tests"]
    assert api.get("/v1/me/tokens").status_code == 401  # no token in token mode


def test_bad_token_requests_name_the_field_and_change_nothing(
    token_api: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = token_api
    ann = add_user(runtime, "ann@example.com")
    before = _tokens(runtime)
    for name in ("", "   ", "a\x00b", "bell\x07", "x" * 101):
        response = api.post("/v1/me/tokens", json={"name": name}, headers=ann)
        if len(name) > 100:
            assert_validation_error(response, "name")
        else:
            assert_input_error(response, 422, "name")
    assert_validation_error(api.post("/v1/me/tokens", json={}, headers=ann), "name")
    assert_validation_error(
        api.post("/v1/me/tokens", json={"name": "a", "admin": True}, headers=ann), "admin"
    )
    assert api.delete("/v1/me/tokens/0", headers=ann).status_code == 422
    assert api.delete("/v1/me/tokens/abc", headers=ann).status_code == 422
    assert _tokens(runtime) == before


def test_a_user_holds_a_bounded_number_of_active_tokens(
    token_api: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = token_api
    ann = add_user(runtime, "ann@example.com")  # holds one ("tests")
    with runtime.database.session() as session:
        user = accounts.get_user(session, "ann@example.com")
        for index in range(MAX_ACTIVE_TOKENS - 1):
            accounts.issue_token(session, user, f"t{index}")
    before = _tokens(runtime)
    refused = api.post("/v1/me/tokens", json={"name": "one more"}, headers=ann)
    assert refused.status_code == 409, refused.text
    assert _tokens(runtime) == before
    first = api.get("/v1/me/tokens", headers=ann).json()["tokens"][0]
    assert api.delete(f"/v1/me/tokens/{first['id']}", headers=ann).status_code == 204
    assert api.post("/v1/me/tokens", json={"name": "one more"}, headers=ann).status_code == 201


def test_a_token_made_in_local_mode_is_local_only(runtime: Runtime) -> None:
    with serve(create_app(runtime.settings, runtime=runtime)) as api:
        created = api.post("/v1/me/tokens", json={"name": "extension"}).json()
        assert created["local_only"] is True
        assert api.get("/v1/me", headers=bearer(created["token"])).status_code == 200
    with runtime.database.session() as session, pytest.raises(AuthenticationError):
        accounts.resolve_token(session, created["token"], auth_mode="token")
