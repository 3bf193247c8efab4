"""Request signing: HMAC-SHA256 (RFC 2104) over timestamp, method, path and body."""

from __future__ import annotations

import hashlib
import hmac

from search2o.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, signed_headers, verify


def test_the_signature_is_hmac_sha256_of_the_documented_message() -> None:
    # RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
    assert (
        hmac.new(b"Jefe", b"what do ya want for nothing?", hashlib.sha256).hexdigest()
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )
    body = b'{"conversation_id":"ab","user_email":"ann@example.com"}'
    expected = hmac.new(
        b"Jefe", b"1700000000.POST./hooks/state/restore." + body, hashlib.sha256
    ).hexdigest()
    assert sign("Jefe", 1700000000, "post", "/hooks/state/restore", body) == f"v1={expected}"
    assert sign(b"Jefe", "1700000000", "POST", "/hooks/state/restore", body.decode()) == (
        f"v1={expected}"
    )


def test_verify_accepts_only_the_same_request_within_the_tolerance() -> None:
    body = b'{"a":1}'
    now = 1_700_000_000
    signature = sign("k", now, "POST", "/p", body)
    assert verify("k", now, "POST", "/p", body, signature, now=now + 299)
    assert not verify("k", now, "POST", "/p", body, signature, now=now + 301)
    assert not verify("k", now, "POST", "/p", body, signature, now=now - 301)
    assert not verify("other", now, "POST", "/p", body, signature, now=now)
    assert not verify("k", now, "POST", "/q", body, signature, now=now)
    assert not verify("k", now, "PUT", "/p", body, signature, now=now)
    assert not verify("k", now, "POST", "/p", b'{"a":2}', signature, now=now)
    assert not verify("k", now + 1, "POST", "/p", body, signature, now=now)
    assert not verify("k", "soon", "POST", "/p", body, signature, now=now)
    assert not verify("k", now, "POST", "/p", body, "", now=now)
    # Several signatures while a secret is rotated: any valid one passes.
    rotated = f"{sign('old', now, 'POST', '/p', body)},{signature}"
    assert verify("k", now, "POST", "/p", body, rotated, now=now)


def test_signed_headers_carry_the_timestamp_and_signature() -> None:
    headers = signed_headers("k", "POST", "/p", b"{}", now=1_700_000_000.7)
    assert headers[TIMESTAMP_HEADER] == "1700000000"
    assert headers[SIGNATURE_HEADER] == sign("k", 1700000000, "POST", "/p", b"{}")
    stamp, signature = headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER]
    assert verify("k", stamp, "POST", "/p", b"{}", signature, now=1_700_000_000)


# Slack's published example (Slack API docs, "Verifying requests from Slack").
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TIMESTAMP = "1531420618"
SLACK_BODY = (
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    "&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner"
    "&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
    "commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id="
    "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_slacks_published_vector() -> None:
    from search2o.signing import slack_signature, verify_slack

    assert slack_signature(SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY) == SLACK_SIGNATURE
    now = float(SLACK_TIMESTAMP) + 1
    assert verify_slack(
        SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY.encode(), SLACK_SIGNATURE, now=now
    )
    assert not verify_slack(
        SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY + "&x=1", SLACK_SIGNATURE, now=now
    )
    assert not verify_slack("another", SLACK_TIMESTAMP, SLACK_BODY, SLACK_SIGNATURE, now=now)
    # The replay window: five minutes either side of the receiver's clock.
    stamp = float(SLACK_TIMESTAMP)
    assert verify_slack(SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY, SLACK_SIGNATURE, now=stamp + 300)
    assert not verify_slack(
        SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY, SLACK_SIGNATURE, now=stamp + 301
    )
    assert not verify_slack(SLACK_SECRET, None, SLACK_BODY, SLACK_SIGNATURE, now=now)
    assert not verify_slack(SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY, None, now=now)
    assert not verify_slack(SLACK_SECRET, "1e9", SLACK_BODY, SLACK_SIGNATURE, now=now)


def test_building_blocks() -> None:
    from search2o.signing import any_matches, fresh, hmac_sha256_hex

    # RFC 4231, test case 2.
    assert hmac_sha256_hex("Jefe", b"what do ya want for nothing?") == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )
    assert fresh("100", now=150, tolerance_s=50) == 100
    assert fresh("100", now=151, tolerance_s=50) is None
    for bad in (None, "", " ", "-5", "1.5", "9" * 20, "\uff11\uff12\uff13"):
        assert fresh(bad, now=0, tolerance_s=10**30) is None
    assert any_matches("v1=a", "v1=b, v1=a")
    assert not any_matches("v1=a", "v1=b")
    assert not any_matches("v1=a", None)
