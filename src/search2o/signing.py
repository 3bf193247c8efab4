"""Request signing, the one module: our outbound scheme and every inbound verification.

**Ours (``v1``)**, on requests we send to an enterprise's services (state hooks, the key
service). Each request carries two headers:

* ``X-Search2o-Timestamp``: the Unix time in whole seconds when it was signed;
* ``X-Search2o-Signature``: ``v1=<hex>``, the HMAC-SHA256 (RFC 2104, with SHA-256 from
  FIPS 180-4) under the shared secret of the bytes ``f"{timestamp}.{METHOD}.{path}."``
  followed by the raw request body. ``path`` is the URL path as sent (no scheme, host or
  query), ``METHOD`` is upper case.

A receiver recomputes the HMAC over the body bytes it received, compares in constant time
(:func:`hmac.compare_digest`) and refuses timestamps further than ``tolerance_s`` (default
300 s) from its clock, so a captured request cannot be replayed later. Several signatures may be
sent comma-separated (``v1=<a>,v1=<b>``) while a secret is being rotated; any valid one passes.
The scheme follows the common webhook pattern (timestamp + payload under HMAC-SHA256, as
Stripe's and Slack's request signing do).

**Slack's (``v0``)**, on requests Slack sends us: ``X-Slack-Signature: v0=<hex HMAC-SHA256
(signing secret, f"v0:{X-Slack-Request-Timestamp}:{raw body}")>``, five minutes of replay window
(Slack API docs, "Verifying requests from Slack"). :func:`slack_signature` and
:func:`verify_slack` implement it with the same helpers.

The building blocks are public so a surface with yet another scheme reuses them instead of
writing a third copy: :func:`hmac_sha256_hex`, :func:`fresh` (the replay window) and
:func:`any_matches` (constant-time comparison against every given entry).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

__all__ = [
    "SIGNATURE_HEADER",
    "SLACK_SIGNATURE_HEADER",
    "SLACK_TIMESTAMP_HEADER",
    "TIMESTAMP_HEADER",
    "any_matches",
    "fresh",
    "hmac_sha256_hex",
    "sign",
    "signed_headers",
    "slack_signature",
    "verify",
    "verify_slack",
]

TIMESTAMP_HEADER = "X-Search2o-Timestamp"
SIGNATURE_HEADER = "X-Search2o-Signature"
SLACK_TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SLACK_SIGNATURE_HEADER = "X-Slack-Signature"
DEFAULT_TOLERANCE_S = 300.0
_VERSION = "v1"
_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def hmac_sha256_hex(secret: str | bytes, message: bytes) -> str:
    """Return ``hex(HMAC-SHA256(secret, message))`` (RFC 2104; the secret UTF-8 when a str)."""
    return hmac.new(_bytes(secret), message, hashlib.sha256).hexdigest()


def fresh(
    timestamp: int | str | None,
    *,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> int | None:
    """Return the timestamp as an int if it is within ``tolerance_s`` of ``now``, else ``None``.

    Args:
        timestamp: Unix seconds as sent (a header value); ``None`` or non-digits are refused.
        now: the receiver's clock (default :func:`time.time`).
        tolerance_s: the replay window, in seconds, either side of ``now``.

    """
    if timestamp is None:
        return None
    text = str(timestamp).strip()
    if not _UNIX_SECONDS.fullmatch(text):  # ASCII only: int() reads fullwidth digits too
        return None
    stamp = int(text)
    clock = time.time() if now is None else now
    return stamp if abs(clock - stamp) <= tolerance_s else None


def any_matches(expected: str, given: str | None) -> bool:
    """Tell whether one comma-separated entry of ``given`` equals ``expected``.

    Every entry is compared in constant time (:func:`hmac.compare_digest`), so the time taken
    does not say which one matched, nor how much of one did.
    """
    if not given:
        return False
    valid = False
    for entry in given.split(","):
        valid |= hmac.compare_digest(entry.strip().encode(), expected.encode())
    return valid


def sign(
    secret: str | bytes, timestamp: int | str, method: str, path: str, body: bytes | str
) -> str:
    """Return the signature header value ``"v1=<64 hex digits>"`` of one request.

    Args:
        secret: the shared secret (UTF-8 when a string).
        timestamp: Unix seconds, as sent in ``X-Search2o-Timestamp``.
        method: the HTTP method (case-insensitive; signed upper case).
        path: the URL path as sent, e.g. ``"/hooks/state/save"``.
        body: the exact request body (UTF-8 when a string).

    Returns:
        ``"v1=" + hex(HMAC-SHA256(secret, f"{timestamp}.{METHOD}.{path}." + body))``
        (RFC 2104).

    """
    message = f"{timestamp}.{method.upper()}.{path}.".encode() + _bytes(body)
    return f"{_VERSION}={hmac_sha256_hex(secret, message)}"


def verify(
    secret: str | bytes,
    timestamp: int | str | None,
    method: str,
    path: str,
    body: bytes | str,
    signature: str | None,
    *,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """Check a request's ``v1`` signature header and the freshness of its timestamp.

    Args:
        secret, timestamp, method, path, body: as for :func:`sign`, taken from the request
            (a missing header is ``None``).
        signature: the ``X-Search2o-Signature`` value; comma-separated ``v1=`` entries allowed.
        now: the receiver's clock in Unix seconds (default: :func:`time.time`).
        tolerance_s: the largest accepted distance between ``timestamp`` and ``now``.

    Returns:
        ``True`` when the timestamp is an integer within ``tolerance_s`` of ``now`` and one
        entry equals :func:`sign` of the request (compared in constant time); ``False``
        otherwise. Never raises on malformed input.

    """
    stamp = fresh(timestamp, now=now, tolerance_s=tolerance_s)
    if stamp is None:
        return False
    return any_matches(sign(secret, stamp, method, path, body), signature)


def signed_headers(
    secret: str | bytes, method: str, path: str, body: bytes | str, *, now: float | None = None
) -> dict[str, str]:
    """Return the two headers that sign a request made now.

    Returns:
        ``{"X-Search2o-Timestamp": "<unix seconds>", "X-Search2o-Signature": "v1=<hex>"}``.

    """
    stamp = int(time.time() if now is None else now)
    return {
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: sign(secret, stamp, method, path, body),
    }


def slack_signature(secret: str | bytes, timestamp: int | str, body: bytes | str) -> str:
    """Return Slack's ``X-Slack-Signature`` value for a request: ``"v0=<hex>"``.

    ``hex(HMAC-SHA256(signing secret, f"v0:{timestamp}:" + raw body))`` (Slack API docs,
    "Verifying requests from Slack").
    """
    message = f"v0:{timestamp}:".encode() + _bytes(body)
    return f"v0={hmac_sha256_hex(secret, message)}"


def verify_slack(
    secret: str | bytes,
    timestamp: int | str | None,
    body: bytes | str,
    signature: str | None,
    *,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """Check a request from Slack: a fresh timestamp and a matching ``v0`` signature.

    Returns:
        ``True`` only when both hold (constant-time compare); ``False`` for anything else,
        never an exception.

    """
    stamp = fresh(timestamp, now=now, tolerance_s=tolerance_s)
    if stamp is None:
        return False
    return any_matches(slack_signature(secret, stamp, body), signature)
