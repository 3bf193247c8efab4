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
