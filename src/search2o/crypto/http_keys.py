"""The ``http`` key provider: a customer's own key service wraps and unwraps, over signed HTTP.

The KEK never enters search2o: we send a data key to ``POST {keys.url}/wrap`` and store only what
comes back. The JSON contract (all binary values standard base64; ``version`` an integer ≥ 1)::

    POST /wrap     {"plaintext"}                      -> {"key_id", "version", "ciphertext"}
    POST /unwrap   {"key_id", "version", "ciphertext"} -> {"plaintext"}
    GET  /versions                                     -> {"key_id", "versions": [
                                                            {"version", "current", "usable"}]}
    POST /rotate   {}                                  -> {"version"}
    POST /retire   {"version"}                         -> any 2xx

``/unwrap`` answers 404 or 410 for an unknown or retired version (:class:`KeyUnavailableError`)
and 422 for a ciphertext that does not unwrap (:class:`IntegrityCheckError`). ``/rotate`` may
answer 404, 405 or 501 when the service manages its versions itself (:class:`ConfigError`; then
``search2o keys rotate`` only re-wraps), ``/retire`` 404, 409 or 422 to refuse a version
(:class:`InputError`). Any other non-2xx answer, a timeout (``keys.timeout_s``), a body that is
not the JSON above, or a data key of the wrong length is a :class:`KeyUnavailableError`; no
message ever holds key material or the service's reply.

Every request is signed, in the style of Stripe's ``Stripe-Signature`` and Slack's
``X-Slack-Signature`` (a timestamp inside the MAC, so an old request cannot be replayed later;
a version prefix, so the scheme can change)::

    X-Search2o-Timestamp: <unix seconds>
    X-Search2o-Signature: v1=<hex HMAC-SHA256(keys.secret, f"{timestamp}.{METHOD}.{path}.{body}")>

``path`` is the request path as sent (with any prefix of ``keys.url``, without query), ``body``
the exact request body (empty for ``GET``). HMAC is RFC 2104 with SHA-256 (FIPS 180-4). The
service checks it with :func:`search2o.signing.verify` (or ten lines of its own) and answers 401
to a bad one. Plain ``http://`` is accepted only for loopback hosts: data keys travel in the bodies.

A customer who would rather run Python than a service needs no code here: any factory
``(KeySettings, data_dir) -> KeyProvider`` registered in the ``search2o.key_providers`` entry
point group is a provider, chosen with ``keys.provider = "<its name>"``.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

import httpx

from search2o.crypto.envelope import DATA_KEY_BYTES
from search2o.crypto.keys import KeyVersion, WrappedKey
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError, InputError, IntegrityCheckError, KeyUnavailableError
from search2o.netpolicy import url_problem
from search2o.signing import signed_headers

__all__ = ["HttpKeyProvider"]

_MIN_SECRET = 16
_MAX_WRAPPED = 8192


class HttpKeyProvider:
    """A :class:`~search2o.crypto.keys.KeyProvider` asking the customer's key service.

    Args:
        url: the service's base URL (``keys.url``): ``https://``, or ``http://`` to loopback.
        secret: the shared HMAC key (``keys.secret``), at least 16 characters.
        timeout_s: per request (``keys.timeout_s``).

    Raises:
        ConfigError: ``url`` or ``secret`` is missing or unusable (the message names the
            setting). Construction makes no request: ``key_id`` is fetched on first use.

    """

    def __init__(self, url: str | None, secret: str | None, *, timeout_s: float = 10.0) -> None:
        self.url = _check_url(url)
        if not secret:
            raise ConfigError(
                "setting keys.secret is required for keys.provider 'http': the HMAC key shared "
                "with the key service (e.g. `openssl rand -hex 32`)"
            )
        if len(secret) < _MIN_SECRET:
            raise ConfigError(
                f"setting keys.secret is {len(secret)} characters; use at least {_MIN_SECRET} "
                "(e.g. `openssl rand -hex 32`)"
            )
        self._secret = secret.encode()
        self._timeout = timeout_s
        self._key_id: str | None = None
        # Built once: making a TLS context (CA bundle load) costs ~50 ms, a client ~0.2 ms.
        self._tls = httpx.create_ssl_context()

    @classmethod
    def from_settings(cls, settings: KeySettings, data_dir: Path) -> HttpKeyProvider:
        """Entry point factory: ``keys.url``, ``keys.secret`` and ``keys.timeout_s``."""
        secret = settings.secret.get_secret_value() if settings.secret else None
        return cls(settings.url, secret, timeout_s=settings.timeout_s)

    # ``key_id`` is a settable attribute of the protocol; a property with a setter satisfies it
    # while letting the first use, not construction, ask the service.
    @property
    def key_id(self) -> str:
        """The KEK's id as the service names it (``GET /versions``, then cached).

        Raises:
            KeyUnavailableError: the service did not answer properly.

        """
        if self._key_id is None:
            self.versions()
        assert self._key_id is not None
        return self._key_id

    @key_id.setter
    def key_id(self, value: str) -> None:
        self._key_id = value

    def wrap(self, data_key: bytes) -> WrappedKey:
        """Have the service wrap ``data_key`` with its current version (``POST /wrap``).

        Raises:
            KeyUnavailableError: unreachable, refused, or a malformed answer.

        """
        reply = self._json("POST", "/wrap", {"plaintext": _b64(data_key)})
        key_id = _text(reply, "key_id", "/wrap")
        version = _version(reply.get("version"), "/wrap")
        blob = _unb64(reply, "ciphertext", "/wrap")
        if not len(data_key) <= len(blob) <= _MAX_WRAPPED:
            raise KeyUnavailableError(
                f"the key service's /wrap returned a ciphertext of {len(blob)} bytes; expected "
                f"{len(data_key)} to {_MAX_WRAPPED}"
            )
        self._key_id = key_id
        return WrappedKey(key_id, version, blob)

    def unwrap(self, wrapped: WrappedKey) -> bytes:
        """Have the service unwrap ``wrapped`` (``POST /unwrap``).

        Raises:
            KeyUnavailableError: unknown or retired version (404/410), unreachable, refused, or
                a malformed answer or a plaintext that is not a 32-byte data key.
            IntegrityCheckError: the service says the ciphertext does not unwrap (422).

        """
        payload = {
            "key_id": wrapped.key_id,
            "version": wrapped.version,
            "ciphertext": _b64(wrapped.blob),
        }
        what = f"data key (KEK {wrapped.key_id} v{wrapped.version})"
        response = self._send("POST", "/unwrap", payload)
        if response.status_code in (404, 410):
            raise KeyUnavailableError(
                f"the key service has no usable KEK {wrapped.key_id} version {wrapped.version} "
                f"(HTTP {response.status_code}: unknown or retired)"
            )
        if response.status_code == 422:
            raise IntegrityCheckError(f"{what} does not unwrap: altered, or another key")
        plaintext = _unb64(self._parse(response, "/unwrap"), "plaintext", "/unwrap")
        if len(plaintext) != DATA_KEY_BYTES:
            raise KeyUnavailableError(
                f"the key service's /unwrap returned {len(plaintext)} bytes for {what}; a data "
                f"key has {DATA_KEY_BYTES}"
            )
        return plaintext

    def versions(self) -> list[KeyVersion]:
        """Return the service's versions, oldest first (``GET /versions``).

        Raises:
            KeyUnavailableError: unreachable, refused, or a malformed answer (e.g. not exactly
                one current version).

        """
        reply = self._json("GET", "/versions", None)
        key_id = _text(reply, "key_id", "/versions")
        items = reply.get("versions")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise _malformed("/versions", "versions must be a list of objects")
        found = [
            KeyVersion(
                _version(i.get("version"), "/versions"),
                _flag(i, "current", "/versions"),
                _flag(i, "usable", "/versions"),
            )
            for i in items
        ]
        if sum(v.current for v in found) != 1:
            raise _malformed("/versions", "exactly one version must be current")
        self._key_id = key_id
        return sorted(found, key=lambda v: v.version)

    def add_version(self) -> int:
        """Ask the service for a new current version (``POST /rotate``); return its number.

        Raises:
            ConfigError: the service manages versions itself (404/405/501).
            KeyUnavailableError: unreachable, refused, or a malformed answer.

        """
        response = self._send("POST", "/rotate", {})
        if response.status_code in (404, 405, 501):
            raise ConfigError(
                f"the key service at {self.url} does not rotate on request "
                f"(HTTP {response.status_code}): add a version there"
            )
        return _version(self._parse(response, "/rotate").get("version"), "/rotate")

    def retire(self, version: int) -> None:
        """Ask the service to retire ``version`` for good (``POST /retire``).

        Raises:
            InputError: the service refuses that version (404/409/422: unknown, current...).
            KeyUnavailableError: unreachable or refused.

        """
        response = self._send("POST", "/retire", {"version": version})
        if response.status_code in (404, 409, 422):
            raise InputError(
                "version",
                f"the key service refused to retire version {version} "
                f"(HTTP {response.status_code}: unknown, current or already retired)",
            )
        self._check_status(response, "/retire")

    # ---------------------------------------------------------------------------------------

    def _json(self, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        return self._parse(self._send(method, path, payload), path)

    def _send(self, method: str, path: str, payload: dict[str, Any] | None) -> httpx.Response:
        url = self.url.join(self.url.path.rstrip("/") + path)
        body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        headers = {
            **signed_headers(self._secret, method, url.path, body),
            "Accept": "application/json",
        }
        if payload is not None:
            headers["Content-Type"] = "application/json"
        # One client per request: nothing to close later, no socket outlives the call.
        try:
            with httpx.Client(timeout=self._timeout, verify=self._tls) as client:
                return client.request(method, url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise KeyUnavailableError(
                f"the key service at {self.url} did not answer {method} {path} within "
                f"{self._timeout:g} s (keys.timeout_s)"
            ) from exc
        except httpx.HTTPError as exc:
            raise KeyUnavailableError(
                f"cannot reach the key service at {self.url} ({method} {path}): "
                f"{type(exc).__name__}"
            ) from exc

    def _check_status(self, response: httpx.Response, path: str) -> None:
        status = response.status_code
        if status == 401:
            raise KeyUnavailableError(
                f"the key service at {self.url} refused the signature of {path} (HTTP 401): "
                "keys.secret must match the service's, and both clocks be right"
            )
        if not 200 <= status < 300:
            raise KeyUnavailableError(
                f"the key service at {self.url} answered {path} with HTTP {status}"
            )

    def _parse(self, response: httpx.Response, path: str) -> dict[str, Any]:
        self._check_status(response, path)
        try:
            reply = json.loads(response.content)
        except ValueError as exc:
            raise _malformed(path, "the body is not JSON") from exc
        if not isinstance(reply, dict):
            raise _malformed(path, "the body is not a JSON object")
        return reply


def _check_url(url: str | None) -> httpx.URL:
    if not url:
        raise ConfigError(
            "setting keys.url is required for keys.provider 'http': the key service's base "
            "URL, e.g. https://keys.example.com/search2o"
        )
    problem = url_problem(url, secure=True, query=False)
    if problem is not None:
        raise ConfigError(f"setting keys.url: {problem} (data keys travel in the requests)")
    parsed = httpx.URL(url)
    return parsed


def _malformed(path: str, reason: str) -> KeyUnavailableError:
    return KeyUnavailableError(f"the key service's {path} answer is malformed: {reason}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(reply: dict[str, Any], field: str, path: str) -> bytes:
    value = reply.get(field)
    if not isinstance(value, str) or not value:
        raise _malformed(path, f"{field} must be a non-empty base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _malformed(path, f"{field} is not valid base64") from exc


def _text(reply: dict[str, Any], field: str, path: str) -> str:
    value = reply.get(field)
    if not isinstance(value, str) or not 0 < len(value) <= 200:
        raise _malformed(path, f"{field} must be a string of 1 to 200 characters")
    return value


def _version(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        shown = repr(value) if isinstance(value, int | None) else type(value).__name__
        raise _malformed(path, f"version must be an integer ≥ 1, got {shown}")
    return value


def _flag(item: dict[str, Any], field: str, path: str) -> bool:
    value = item.get(field)
    if not isinstance(value, bool):
        raise _malformed(path, f"{field} must be true or false")
    return value
