"""The conformance suite against an HTTP state hook: a hook as a target, and wire-level checks.

:func:`http_hook_target` runs the store checks of :mod:`search2o.state.conformance` through the
hook's HTTP contract (docs/state-hooks.md); :data:`HTTP_CHECKS` check what only the wire shows:
signatures, timestamps and malformed requests are refused.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import Callable

import httpx

from search2o.accounts import Principal
from search2o.errors import ProviderError
from search2o.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers
from search2o.state.conformance import CheckResult, ConformanceTarget, StoreFactory, _ensure, _timed
from search2o.state.hooks import HookStateStore, HttpStateHook
from search2o.state.model import ConversationState
from search2o.storage.models import new_id

__all__ = [
    "HTTP_CHECKS",
    "check_http_refuses_a_stale_timestamp",
    "check_http_refuses_a_wrong_signature",
    "check_http_refuses_malformed_requests",
    "check_http_requires_a_signature",
    "http_hook_target",
    "reach_hook",
    "run_http_checks",
]


def http_hook_target(url: str, secret: str, timeout_s: float = 10.0) -> StoreFactory:
    """Return a factory of targets that talk to the HTTP hook at ``url``.

    Users are made up (``conformance-<random>@example.invalid``), conversations are random
    ids; ownership is left to the hook (there is no database of ours to check it against).
    """

    def new_user() -> Principal:
        tag = secrets.token_hex(6)
        return Principal(secrets.randbelow(2**31), f"conformance-{tag}@example.invalid", ())

    def factory() -> ConformanceTarget:
        hook = HttpStateHook(url, secret, timeout_s)
        store = HookStateStore(hook, name=hook.name)
        return ConformanceTarget(store, new_user, lambda _user: new_id())

    return factory


def _raw_post(
    url: str,
    suffix: str,
    body: bytes,
    headers: dict[str, str],
    timeout_s: float,
) -> httpx.Response:
    target = httpx.URL(url.rstrip("/") + suffix)
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        return client.post(
            target, content=body, headers={"Content-Type": "application/json", **headers}
        )


def reach_hook(url: str, timeout_s: float = 10.0) -> None:
    """Check that the hook at ``url`` answers HTTP at all, before the suite runs.

    One unsigned ``POST URL/restore`` with an empty object: any HTTP status (a hook must refuse
    it) means the hook is reachable; only a failure below HTTP (refused connection, unknown
    host, TLS failure, timeout) is a problem, reported once instead of once per check.

    Raises:
        ProviderError: ``cannot reach the hook at URL: <reason>``.

    """
    try:
        _raw_post(url, "/restore", b"{}", {}, timeout_s)
    except httpx.TimeoutException:
        raise ProviderError(
            f"cannot reach the hook at {url}: no answer within {timeout_s:g} s"
        ) from None
    except httpx.TransportError as exc:
        reason = str(exc).strip() or type(exc).__name__
        raise ProviderError(f"cannot reach the hook at {url}: {reason}") from None


def _path(url: str, suffix: str) -> str:
    return httpx.URL(url.rstrip("/") + suffix).raw_path.decode("ascii")


def _probe_body() -> bytes:
    email = f"conformance-{secrets.token_hex(6)}@example.invalid"
    return json.dumps({"conversation_id": new_id(), "user_email": email}).encode()


def check_http_requires_a_signature(url: str, secret: str, timeout_s: float = 10.0) -> None:
    """Check that an unsigned request is refused with 401 or 403."""
    reply = _raw_post(url, "/restore", _probe_body(), {}, timeout_s)
    _ensure(
        reply.status_code in (401, 403),
        f"an unsigned POST /restore got HTTP {reply.status_code}; expected 401 or 403",
    )


def check_http_refuses_a_wrong_signature(url: str, secret: str, timeout_s: float = 10.0) -> None:
    """Check that a request signed with another secret, or altered, is refused."""
    body = _probe_body()
    wrong = signed_headers(secret + "-wrong", "POST", _path(url, "/restore"), body)
    reply = _raw_post(url, "/restore", body, wrong, timeout_s)
    _ensure(
        reply.status_code in (401, 403),
        f"POST /restore signed with another secret got HTTP {reply.status_code}; "
        "expected 401 or 403",
    )
    headers = signed_headers(secret, "POST", _path(url, "/restore"), body)
    altered = body.replace(b'"user_email": "', b'"user_email": "x')
    reply = _raw_post(url, "/restore", altered, headers, timeout_s)
    _ensure(
        reply.status_code in (401, 403),
        f"POST /restore with an altered body got HTTP {reply.status_code}; expected 401 or 403",
    )


def check_http_refuses_a_stale_timestamp(url: str, secret: str, timeout_s: float = 10.0) -> None:
    """Check that a correctly signed request from an hour ago is refused (no replays)."""
    body = _probe_body()
    old = signed_headers(secret, "POST", _path(url, "/restore"), body, now=time.time() - 3600)
    reply = _raw_post(url, "/restore", body, old, timeout_s)
    _ensure(
        reply.status_code in (401, 403),
        f"POST /restore signed an hour ago got HTTP {reply.status_code}; expected 401 or 403",
    )
    _ensure(TIMESTAMP_HEADER in old and SIGNATURE_HEADER in old, "signed_headers lost a header")


def check_http_refuses_malformed_requests(url: str, secret: str, timeout_s: float = 10.0) -> None:
    """Check that signed but malformed requests get 400 or 422 and store nothing."""
    conversation = new_id()
    email = f"conformance-{secrets.token_hex(6)}@example.invalid"
    bodies = {
        "a body that is not JSON": b"{not json",
        "a state that is not an object": json.dumps(
            {
                "conversation_id": conversation,
                "user_email": email,
                "state": "nope",
                "expected_version": 0,
            }
        ).encode(),
        "an expected_version that is not an integer": json.dumps(
            {
                "conversation_id": conversation,
                "user_email": email,
                "state": ConversationState().to_json(),
                "expected_version": "zero",
            }
        ).encode(),
        "no user_email": json.dumps(
            {
                "conversation_id": conversation,
                "state": ConversationState().to_json(),
                "expected_version": 0,
            }
        ).encode(),
    }
    for what, body in bodies.items():
        headers = signed_headers(secret, "POST", _path(url, "/save"), body)
        reply = _raw_post(url, "/save", body, headers, timeout_s)
        _ensure(
            reply.status_code in (400, 422),
            f"a signed POST /save with {what} got HTTP {reply.status_code}; expected 400 or 422",
        )
    body = json.dumps({"conversation_id": conversation, "user_email": email}).encode()
    headers = signed_headers(secret, "POST", _path(url, "/restore"), body)
    reply = _raw_post(url, "/restore", body, headers, timeout_s)
    _ensure(
        reply.status_code == 404,
        f"after the malformed saves, POST /restore got HTTP {reply.status_code}; expected 404 "
        "(nothing stored)",
    )


HTTP_CHECKS: tuple[Callable[[str, str, float], None], ...] = (
    check_http_requires_a_signature,
    check_http_refuses_a_wrong_signature,
    check_http_refuses_a_stale_timestamp,
    check_http_refuses_malformed_requests,
)
"""Wire-level checks of an HTTP hook: ``check(url, secret, timeout_s)``."""


def run_http_checks(url: str, secret: str, timeout_s: float = 10.0) -> list[CheckResult]:
    """Run :data:`HTTP_CHECKS` against the hook at ``url``; never raises for a failing check.

    Returns:
        One :class:`CheckResult` per check.

    """
    return [
        _timed(check.__name__, functools.partial(check, url, secret, timeout_s))
        for check in HTTP_CHECKS
    ]
