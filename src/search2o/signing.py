"""Signed HTTP requests to an enterprise's services (state hooks, and any hook that wants it).

Each request carries two headers:

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
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "sign",
    "signed_headers",
    "verify",
]

TIMESTAMP_HEADER = "X-Search2o-Timestamp"
SIGNATURE_HEADER = "X-Search2o-Signature"
_VERSION = "v1"


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


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
    digest = hmac.new(_bytes(secret), message, hashlib.sha256).hexdigest()
    return f"{_VERSION}={digest}"


def verify(
    secret: str | bytes,
    timestamp: int | str,
    method: str,
    path: str,
    body: bytes | str,
    signature: str,
    *,
    now: float | None = None,
    tolerance_s: float = 300.0,
) -> bool:
    """Check a request's signature header and the freshness of its timestamp.

    Args:
        secret, timestamp, method, path, body: as for :func:`sign`, taken from the request.
        signature: the ``X-Search2o-Signature`` value; comma-separated ``v1=`` entries allowed.
        now: the receiver's clock in Unix seconds (default: :func:`time.time`).
        tolerance_s: the largest accepted distance between ``timestamp`` and ``now``.

    Returns:
        ``True`` when the timestamp is an integer within ``tolerance_s`` of ``now`` and one
        entry equals :func:`sign` of the request (compared in constant time); ``False``
        otherwise. Never raises on malformed input.

    """
    try:
        stamp = int(str(timestamp).strip())
    except ValueError:
        return False
    clock = time.time() if now is None else now
    if abs(clock - stamp) > tolerance_s:
        return False
    expected = sign(secret, stamp, method, path, body)
    valid = False
    for entry in signature.split(","):
        # Check every entry so the time taken does not say which one matched.
        valid |= hmac.compare_digest(entry.strip().encode(), expected.encode())
    return valid


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
