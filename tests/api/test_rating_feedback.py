"""A thumbs-down's reasons and comment: checked, stored sealed, shown to the rater and to admin
triage, cleared with the rating — on both backends, through a real server on loopback."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text

from search2o.runtime import Runtime
from tests.api.test_api import add_user, assert_input_error, md
from tests.api.test_web_endpoints import PUBLIC_DOC

COMMENT = "The cafeteria moved to the third floor in March."


def _answer(api: httpx.Client, user: dict[str, str]) -> str:
    answer = api.post(
        "/v1/chat", json={"message": "When is lunch served?", "stream": False}, headers=user
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["message_id"])


def _rate(api: httpx.Client, user: dict[str, str], message_id: str, **body: Any) -> httpx.Response:
    return api.put(f"/v1/messages/{message_id}/rating", json=body, headers=user)


def test_a_down_rating_keeps_its_reasons_and_sealed_comment(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com")
    token_api.post("/v1/documents?wait=60", files=[md("lunch.md", PUBLIC_DOC)], headers=admin)
    message_id = _answer(token_api, bob)
    reasons = ["outdated", "wrong_source"]
    comment = f" {COMMENT}\n"  # stored stripped
    rated = _rate(token_api, bob, message_id, rating="down", reasons=reasons, comment=comment)
    assert rated.status_code == 200, rated.text
    assert (rated.json()["rating_reasons"], rated.json()["rating_comment"]) == (reasons, COMMENT)
    conversation = rated.json()["conversation_id"]
    shown = token_api.get(f"/v1/conversations/{conversation}", headers=bob).json()["messages"][-1]
    assert (shown["rating"], shown["rating_reasons"], shown["rating_comment"]) == (
        "down",
        reasons,
        COMMENT,
    )
    # the comment is the user's text: stored only sealed, like the message itself
    with token_runtime.database.engine.connect() as conn:
        stored = conn.execute(
            text("SELECT rating_comment FROM messages WHERE id = :id"), {"id": message_id}
        ).scalar_one()
    assert COMMENT.encode() not in bytes(stored)
    items = token_api.get("/v1/feedback", headers=admin).json()["feedback"]
    assert [(i["message_id"], i["reasons"], i["comment"], i["has_trace"]) for i in items] == [
        (message_id, reasons, COMMENT, True)
    ]
    # a new rating replaces the old one whole; clearing it clears its reasons and comment
    again = _rate(token_api, bob, message_id, rating="down", reasons=["missing_information"])
    assert (again.json()["rating_reasons"], again.json()["rating_comment"]) == (
        ["missing_information"],
        None,
    )
    cleared = _rate(token_api, bob, message_id, rating=None)
    assert cleared.status_code == 200
    body = cleared.json()
    assert (body["rating"], body["rating_reasons"], body["rating_comment"]) == (None, [], None)
    assert token_api.get("/v1/feedback?rating=any", headers=admin).json() == {"feedback": []}
    with token_runtime.database.engine.connect() as conn:
        row = conn.execute(
            text("SELECT rating_reasons, rating_comment FROM messages WHERE id = :id"),
            {"id": message_id},
        ).one()
    assert tuple(row) == (None, None)


def test_reasons_and_comment_are_refused_unless_down_and_valid(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    bob = add_user(token_runtime, "bob@example.com")
    message_id = _answer(token_api, bob)
    first = _rate(token_api, bob, message_id, rating="down", reasons=["outdated"], comment="old")
    assert first.status_code == 200
    refusals = [
        ({"rating": "up", "reasons": ["outdated"]}, "reasons"),
        ({"rating": "up", "comment": "nice"}, "comment"),
        ({"rating": None, "comment": "nice"}, "comment"),
        ({"rating": "down", "reasons": ["outdated", "outdated"]}, "reasons.1"),
        ({"rating": "down", "reasons": ["boring"]}, "reasons.0"),
        ({"rating": "down", "comment": "x" * 2001}, "comment"),
        ({"rating": "down", "comment": "   "}, "comment"),
        ({"rating": "down", "comment": "a\u0000b"}, "comment"),
    ]
    for body, field in refusals:
        detail = assert_input_error(_rate(token_api, bob, message_id, **body), 422, field)
        if field == "comment" and len(body.get("comment") or "") > 2000:
            assert "chat.max_feedback_comment_chars" in detail["reason"]
    # nothing changed
    kept = token_api.get(
        f"/v1/conversations/{first.json()['conversation_id']}", headers=bob
    ).json()["messages"][-1]
    assert (kept["rating"], kept["rating_reasons"], kept["rating_comment"]) == (
        "down",
        ["outdated"],
        "old",
    )
    # a thumbs-up alone is as before
    up = _rate(token_api, bob, message_id, rating="up")
    assert (up.json()["rating"], up.json()["rating_reasons"], up.json()["rating_comment"]) == (
        "up",
        [],
        None,
    )
