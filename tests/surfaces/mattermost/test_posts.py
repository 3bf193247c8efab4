"""What a post becomes (pure): a question, or nothing — own posts, edits, bots, system posts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from search2o.surfaces.mattermost.posts import Bot, decode_posted, normalise_post
from search2o.surfaces.mattermost.render import MAX_CHARS, render_answer, split
from tests.surfaces.mattermost.fake_mattermost import ANN_ID, BOT_ID, DM_ID, TOWN_ID, new_id

BOT = Bot(BOT_ID, "search2o")


def post(text: str, **values: Any) -> dict[str, Any]:
    return {
        "id": new_id(),
        "user_id": ANN_ID,
        "channel_id": DM_ID,
        "root_id": "",
        "message": text,
        "type": "",
        "edit_at": 0,
        "delete_at": 0,
        "props": {},
        "create_at": 1,
        **values,
    }


def never(channel: str, root: str) -> bool:
    return False


def test_a_dm_is_a_direct_question_in_its_own_thread() -> None:
    found = post("  How many   vacation days? ")
    inbound = normalise_post(found, "D", [], BOT, never)
    assert inbound is not None and inbound.direct and inbound.text == "How many vacation days?"
    assert inbound.event_key == inbound.message_key == inbound.thread_key == found["id"]
    assert inbound.workspace == BOT_ID


@pytest.mark.parametrize(
    "values",
    [
        {"user_id": BOT_ID},  # our own post
        {"edit_at": 5},  # an edit
        {"delete_at": 5},
        {"type": "system_join_channel"},
        {"props": {"from_bot": "true"}},
        {"props": {"from_webhook": "true"}},
        {"message": "\x00"},
        {"id": "not-an-id"},
    ],
)
def test_what_is_never_answered(values: dict[str, Any]) -> None:
    assert normalise_post(post("hello", **values), "D", [], BOT, never) is None


def test_a_channel_post_needs_a_mention_or_a_known_thread() -> None:
    plain = post("vacation?", channel_id=TOWN_ID)
    assert normalise_post(plain, "O", [], BOT, never) is None
    named = normalise_post(post("@search2o vacation?", channel_id=TOWN_ID), "O", [], BOT, never)
    assert named is not None and named.text == "vacation?" and not named.direct
    assert normalise_post(plain, "O", [BOT_ID], BOT, never) is not None
    reply = post("and then?", channel_id=TOWN_ID, root_id=new_id())
    assert normalise_post(reply, "O", [], BOT, lambda c, r: r == reply["root_id"]) is not None
    assert normalise_post(post("@search2o", channel_id=TOWN_ID), "O", [], BOT, never) is None


def test_a_posted_event_carries_its_post_and_mentions_as_json_strings() -> None:
    found = post("hi")
    event = {
        "event": "posted",
        "data": {"post": json.dumps(found), "channel_type": "D", "mentions": json.dumps([BOT_ID])},
    }
    assert decode_posted(event) == (found, "D", [BOT_ID])
    assert decode_posted({"event": "post_edited", "data": event["data"]}) is None
    assert decode_posted({"event": "posted", "data": {"post": "{not json"}}) is None


def test_rendering_leaves_no_mention_no_image_and_links_citations() -> None:
    citations = [
        {
            "number": 1,
            "title": "Hand[book](x)",
            "url": "https://h.example/a",
            "heading_path": ["Leave"],
        }
    ]
    (text,) = render_answer("@channel see ![x](https://t.example/p.png) [1]", citations)
    assert "@channel" not in text and "@\u200bchannel" in text
    assert "![" not in text
    assert "[\\[1\\]](https://h.example/a)" in text
    assert "[Hand\\[book\\](x)](https://h.example/a) — Leave" in text


def test_split_cuts_at_line_breaks_within_the_limit() -> None:
    text = "\n".join(["a" * 100] * 400)
    pieces = split(text)
    assert len(pieces) == 3 and all(len(p) <= MAX_CHARS for p in pieces)
    assert "\n".join(pieces) == text
