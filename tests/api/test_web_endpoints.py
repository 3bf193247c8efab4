"""The read-only endpoints the Web App uses: /v1/me, cursor pages of conversations with title
search, passages under the reader's rights, the waiting agent, and the admin views — on both
backends, through a real server on loopback."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest

from search2o.runtime import Runtime
from tests.api.test_api import add_user, assert_input_error, md
from tests.web.seed import seed_conversations, title_of

HR_DOC = (
    b"# Staff salary bands\n\nThe salary band of a staff engineer is 180,000 zorkmids a year, "
    b"reviewed every spring by the people team.\n"
)
PUBLIC_DOC = b"# Lunch\n\nLunch is served at noon in the cafeteria on the second floor.\n"


def test_me_says_who_the_caller_is(token_runtime: Runtime, token_api: httpx.Client) -> None:
    admin = add_user(token_runtime, "ann@example.com", ("hr",), admin=True)
    bob = add_user(token_runtime, "bob@example.com", ("eng",))
    assert token_api.get("/v1/me").status_code == 401
    me = token_api.get("/v1/me", headers=bob).json()
    assert me == {
        "email": "bob@example.com",
        "groups": ["eng"],
        "is_admin": False,
        "plan": "free",
        "auth_mode": "token",
        "retention_days": 7,
    }
    assert token_api.get("/v1/me", headers=admin).json()["is_admin"] is True


def test_conversation_pages_cover_every_conversation_once_pinned_first(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    bob = add_user(token_runtime, "bob@example.com")
    add_user(token_runtime, "eve@example.com")
    ids = seed_conversations(
        token_runtime, token_runtime.principal_for("bob@example.com"), 23, days=5
    )
    seed_conversations(token_runtime, token_runtime.principal_for("eve@example.com"), 4, days=5)
    seen: list[dict[str, object]] = []
    cursor = None
    for _ in range(10):
        params = {"limit": 5, **({"cursor": cursor} if cursor else {})}
        response = token_api.get("/v1/me/conversations", params=params, headers=bob)
        assert response.status_code == 200, response.text
        page = response.json()
        seen.extend(page["conversations"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [c["id"] for c in seen] == ids  # seeded newest first, the first 3 pinned
    assert [c["pinned"] for c in seen[:4]] == [True, True, True, False]
    for c in seen:
        if c["pinned"]:
            assert c["expires_at"] is None
        else:
            used = datetime.fromisoformat(str(c["last_used_at"]))
            assert datetime.fromisoformat(str(c["expires_at"])) == used + timedelta(days=7)


def test_title_search_reads_only_the_callers_titles(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    bob = add_user(token_runtime, "bob@example.com")
    eve = add_user(token_runtime, "eve@example.com")
    seed_conversations(token_runtime, token_runtime.principal_for("bob@example.com"), 30, days=5)
    seed_conversations(token_runtime, token_runtime.principal_for("eve@example.com"), 30, days=5)
    found = token_api.get("/v1/me/conversations", params={"q": "QUESTION 17 "}, headers=bob)
    assert [c["title"] for c in found.json()["conversations"]] == [title_of(17)]
    ids_bob = {
        c["id"]
        for c in token_api.get(
            "/v1/me/conversations", params={"q": "topic", "limit": 200}, headers=bob
        ).json()["conversations"]
    }
    ids_eve = {
        c["id"]
        for c in token_api.get(
            "/v1/me/conversations", params={"q": "topic", "limit": 200}, headers=eve
        ).json()["conversations"]
    }
    assert len(ids_bob) == len(ids_eve) == 30 and not ids_bob & ids_eve


def test_bounded_title_search_pages_on_with_a_cursor(token_runtime: Runtime) -> None:
    from search2o.query.conversation_pages import page

    add_user(token_runtime, "bob@example.com")
    bob = token_runtime.principal_for("bob@example.com")
    seed_conversations(token_runtime, bob, 12, days=5, pinned=0)
    kwargs = {"query": "question 11 ", "scan_limit": 5, "limit": 3}
    first = page(token_runtime.database, token_runtime.vault, bob, **kwargs)  # type: ignore[arg-type]
    assert first.items == [] and first.next_cursor is not None
    titles: list[str] = []
    cursor = first.next_cursor
    while cursor is not None:
        more = page(token_runtime.database, token_runtime.vault, bob, cursor=cursor, **kwargs)  # type: ignore[arg-type]
        titles.extend(i.info.title for i in more.items)
        cursor = more.next_cursor
    assert titles == [title_of(11)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "WzEsMiwzXQ"}, "cursor"),  # base64url of [1,2,3]: not our shape
        ({"q": "   "}, "q"),
    ],
)
def test_bad_page_parameters_name_the_field(
    token_runtime: Runtime, token_api: httpx.Client, params: dict[str, str], field: str
) -> None:
    bob = add_user(token_runtime, "bob@example.com")
    response = token_api.get("/v1/me/conversations", params=params, headers=bob)
    assert_input_error(response, 422, field)


def test_hr_document_is_never_shown_cited_or_readable_outside_hr(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    carol = add_user(token_runtime, "carol@example.com", ("hr",))
    bob = add_user(token_runtime, "bob@example.com", ("eng",))
    uploaded = token_api.post(
        "/v1/documents?wait=60",
        files=[md("bands.md", HR_DOC)],
        data={"groups": "hr"},
        headers=admin,
    )
    assert uploaded.status_code == 201, uploaded.text
    token_api.post("/v1/documents?wait=60", files=[md("lunch.md", PUBLIC_DOC)], headers=admin)
    question = "What is the salary band of a staff engineer?"
    hits = token_api.post("/v1/search", json={"query": question, "k": 10}, headers=carol).json()
    secret = next(h for h in hits["hits"] if h["source"] == "upload:bands.md")

    # hr reads it: searched, cited, readable passage.
    assert token_api.get(f"/v1/passages/{secret['chunk_id']}", headers=carol).json()["text"]
    answer = token_api.post("/v1/chat", json={"message": question, "stream": False}, headers=carol)
    assert "zorkmids" in answer.json()["text"]
    assert "upload:bands.md" in {c["source"] for c in answer.json()["citations"]}

    # Outside hr: not listed, not found, not cited, its passage answered like a missing one.
    assert "upload:bands.md" not in {
        d["source"] for d in token_api.get("/v1/documents", headers=bob).json()
    }
    found = token_api.post("/v1/search", json={"query": question, "k": 10}, headers=bob).json()
    assert "upload:bands.md" not in {h["source"] for h in found["hits"]}
    passage = token_api.get(f"/v1/passages/{secret['chunk_id']}", headers=bob)
    missing = token_api.get("/v1/passages/999999", headers=bob)
    assert passage.status_code == missing.status_code == 404
    told = passage.json()["detail"]["message"].replace(str(secret["chunk_id"]), "N")
    assert told == missing.json()["detail"]["message"].replace("999999", "N")
    reply = token_api.post("/v1/chat", json={"message": question, "stream": False}, headers=bob)
    assert "zorkmids" not in reply.json()["text"]
    assert "upload:bands.md" not in {c["source"] for c in reply.json()["citations"]}


def test_admin_views_are_for_admins_only(token_runtime: Runtime, token_api: httpx.Client) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com", ("eng",))
    for path in ("/v1/users", "/v1/feedback", "/v1/settings"):
        assert token_api.get(path, headers=bob).status_code == 403, path
        assert token_api.get(path, headers=admin).status_code == 200, path
    users = token_api.get("/v1/users", headers=admin).json()["users"]
    assert [(u["email"], u["groups"], u["is_admin"]) for u in users] == [
        ("ann@example.com", [], True),
        ("bob@example.com", ["eng"], False),
    ]
    assert "token" not in str(users)
    settings = token_api.get("/v1/settings", headers=admin).json()
    assert settings["web_search"] is False and settings["chat_provider"] == "builtin"
    assert settings["retention_days"] == {"free": 7, "paid": None}


def test_feedback_lists_rated_answers_with_their_trace(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com")
    token_api.post("/v1/documents?wait=60", files=[md("lunch.md", PUBLIC_DOC)], headers=admin)
    answer = token_api.post(
        "/v1/chat", json={"message": "When is lunch served?", "stream": False}, headers=bob
    ).json()
    assert token_api.get("/v1/feedback", headers=admin).json() == {"feedback": []}
    rated = token_api.put(
        f"/v1/messages/{answer['message_id']}/rating", json={"rating": "down"}, headers=bob
    )
    assert rated.status_code == 200
    items = token_api.get("/v1/feedback", headers=admin).json()["feedback"]
    assert [(i["message_id"], i["user_email"], i["rating"], i["has_trace"]) for i in items] == [
        (answer["message_id"], "bob@example.com", "down", True)
    ]
    assert token_api.get("/v1/feedback?rating=up", headers=admin).json()["feedback"] == []
    trace = token_api.get(f"/v1/messages/{items[0]['message_id']}/trace", headers=admin)
    assert trace.status_code == 200 and trace.json()["decision"] == "tools"
    assert_input_error(token_api.get("/v1/feedback?limit=0", headers=admin), 422, "limit")


def test_waiting_agent_of_a_conversation(token_runtime: Runtime, token_api: httpx.Client) -> None:
    bob = add_user(token_runtime, "bob@example.com")
    eve = add_user(token_runtime, "eve@example.com")
    answer = token_api.post("/v1/chat", json={"message": "hello!", "stream": False}, headers=bob)
    conversation = answer.json()["conversation_id"]
    assert token_api.get(f"/v1/conversations/{conversation}/waiting", headers=bob).json() == {
        "agent": None
    }
    other = token_api.get(f"/v1/conversations/{conversation}/waiting", headers=eve)
    assert other.status_code == 404
