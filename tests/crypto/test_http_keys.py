"""The ``http`` provider against a real key service on loopback that checks every signature."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from search2o.crypto.envelope import new_data_key
from search2o.crypto.http_keys import HttpKeyProvider
from search2o.crypto.keys import WrappedKey, build_key_provider
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError, InputError, IntegrityCheckError, KeyUnavailableError
from search2o.signing import sign
from search2o.signing import verify as verify_signature
from tests.conftest import free_port
from tests.crypto.conftest import SECRET
from tests.crypto.keyservice import KeyService

Service = tuple[KeyService, str]


def provider(url: str, secret: str = SECRET, timeout_s: float = 5.0) -> HttpKeyProvider:
    return HttpKeyProvider(url, secret, timeout_s=timeout_s)


# -- the signature ---------------------------------------------------------------------------


def test_verify_signature_accepts_only_the_signed_request() -> None:
    now = int(time.time())
    header = sign(SECRET, now, "post", "/kms/wrap", b'{"plaintext":"AA=="}')
    assert header.startswith("v1=") and len(header) == 3 + 64
    args = (str(now), "POST", "/kms/wrap", b'{"plaintext":"AA=="}')
    assert verify_signature(SECRET, *args, header)
    assert verify_signature(SECRET.encode(), *args, f"v0=abc, {header}")  # any v1 may match
    assert verify_signature(SECRET, str(now), "POST", "/kms/wrap", '{"plaintext":"AA=="}', header)
    assert not verify_signature("another-secret-of-16", *args, header)
    assert not verify_signature(
        SECRET, str(now), "POST", "/kms/wrap", b'{"plaintext":"AB=="}', header
    )
    assert not verify_signature(
        SECRET, str(now), "GET", "/kms/wrap", b'{"plaintext":"AA=="}', header
    )
    assert not verify_signature(SECRET, str(now), "POST", "/kms/unwrap", args[3], header)
    assert not verify_signature(SECRET, str(now + 1), *args[1:], header)
    assert not verify_signature(SECRET, *args, None)
    assert not verify_signature(SECRET, None, *args[1:], header)
    assert not verify_signature(SECRET, "soon", *args[1:], header)
    assert not verify_signature(SECRET, *args, header.removeprefix("v1="))
    # A replay after the tolerance is refused; within it, accepted.
    assert verify_signature(SECRET, *args, header, now=now + 299)
    assert not verify_signature(SECRET, *args, header, now=now + 301)
    assert not verify_signature(SECRET, *args, header, tolerance_s=10, now=now - 11)


# -- the contract ----------------------------------------------------------------------------


def test_wrap_and_unwrap_through_the_service(key_service: Service) -> None:
    service, url = key_service
    keys = provider(url)
    assert service.calls == []  # construction asks nothing
    data_key = new_data_key()
    wrapped = keys.wrap(data_key)
    assert (wrapped.key_id, wrapped.version) == ("customer-kek", 1)
    assert data_key not in wrapped.blob
    assert keys.key_id == "customer-kek"
    assert keys.unwrap(wrapped) == data_key
    assert provider(url).key_id == "customer-kek"  # fetched from /versions
    assert service.calls == ["POST /wrap", "POST /unwrap", "GET /versions"]
    assert service.refused == 0


def test_rotate_and_retire_through_the_service(key_service: Service) -> None:
    _, url = key_service
    keys = provider(url)
    data_key = new_data_key()
    old = keys.wrap(data_key)
    assert keys.add_version() == 2
    new = keys.wrap(data_key)
    assert new.version == 2 and keys.unwrap(old) == keys.unwrap(new) == data_key
    assert [(v.version, v.current, v.usable) for v in keys.versions()] == [
        (1, False, True),
        (2, True, True),
    ]
    with pytest.raises(InputError, match="refused to retire version 2") as refused:
        keys.retire(2)  # current
    assert refused.value.field == "version"
    keys.retire(1)
    assert [(v.version, v.usable) for v in keys.versions()] == [(1, False), (2, True)]
    with pytest.raises(KeyUnavailableError, match="no usable KEK customer-kek version 1"):
        keys.unwrap(old)
    assert keys.unwrap(new) == data_key
    with pytest.raises(InputError):
        keys.retire(7)


def test_a_tampered_wrapped_key_fails_its_integrity_check(key_service: Service) -> None:
    _, url = key_service
    keys = provider(url)
    wrapped = keys.wrap(new_data_key())
    bad = bytearray(wrapped.blob)
    bad[0] ^= 1
    with pytest.raises(IntegrityCheckError, match="does not unwrap"):
        keys.unwrap(WrappedKey(wrapped.key_id, wrapped.version, bytes(bad)))


def test_a_bad_signature_is_refused(key_service: Service) -> None:
    service, url = key_service
    wrong = "not-the-shared-secret-at-all"
    with pytest.raises(
        KeyUnavailableError, match=r"refused the signature.*HTTP 401.*keys\.secret"
    ) as caught:
        provider(url, secret=wrong).wrap(new_data_key())
    assert wrong not in caught.value.message and SECRET not in caught.value.message
    assert service.refused == 1 and service.calls == []


def test_a_timeout_names_the_setting(key_service: Service) -> None:
    service, url = key_service
    service.mode = "slow"
    started = time.monotonic()
    with pytest.raises(KeyUnavailableError, match=r"within 0\.2 s \(keys\.timeout_s\)"):
        provider(url, timeout_s=0.2).versions()
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    ("mode", "call", "reason"),
    [
        ("garbage", "wrap", "not JSON"),
        ("garbage", "versions", "not JSON"),
        ("short", "unwrap", "returned 16 bytes"),
        ("two-current", "versions", "exactly one version must be current"),
    ],
)
def test_malformed_replies_are_key_unavailable(
    key_service: Service, mode: str, call: str, reason: str
) -> None:
    service, url = key_service
    keys = provider(url)
    data_key = new_data_key()
    wrapped = keys.wrap(data_key)
    keys.add_version()
    service.mode = mode
    with pytest.raises(KeyUnavailableError, match=reason) as caught:
        if call == "wrap":
            keys.wrap(data_key)
        elif call == "unwrap":
            keys.unwrap(wrapped)
        else:
            keys.versions()
    text = caught.value.message
    assert base64.b64encode(data_key).decode() not in text
    assert base64.b64encode(data_key[:16]).decode()[:20] not in text  # never the service's reply


def test_a_service_that_rotates_itself(key_service: Service) -> None:
    service, url = key_service
    service.mode = "no-rotate"
    with pytest.raises(ConfigError, match="does not rotate on request"):
        provider(url).add_version()


def test_an_unreachable_service(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(KeyUnavailableError, match="cannot reach the key service"):
        provider(f"http://127.0.0.1:{port}").wrap(new_data_key())


# -- settings ----------------------------------------------------------------------------------


def test_built_by_entry_point_from_settings(key_service: Service, tmp_path: Path) -> None:
    _, url = key_service
    settings = KeySettings(provider="http", url=url, secret=SECRET, timeout_s=3)  # type: ignore[arg-type]
    keys = build_key_provider(settings, tmp_path)
    assert isinstance(keys, HttpKeyProvider)
    data_key = new_data_key()
    assert keys.unwrap(keys.wrap(data_key)) == data_key


@pytest.mark.parametrize(
    ("url", "secret", "message"),
    [
        (None, SECRET, r"keys\.url is required"),
        ("", SECRET, r"keys\.url is required"),
        ("https://kms.example.com", None, r"keys\.secret is required"),
        ("https://kms.example.com", "short", r"keys\.secret is 5 characters"),
        ("http://kms.example.com", SECRET, r"keys\.url.*plain http to a remote host"),
        ("ftp://kms.example.com", SECRET, r"keys\.url.*must be an http\(s\) URL"),
        ("https://kms.example.com/?a=1", SECRET, r"keys\.url.*query"),
    ],
)
def test_bad_settings_name_the_field(url: str | None, secret: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        HttpKeyProvider(url, secret)
    assert SECRET not in caught.value.message


def test_loopback_http_and_https_are_accepted() -> None:
    for url in ("http://localhost:9", "http://[::1]:9/kms", "https://kms.example.com/v1"):
        assert str(HttpKeyProvider(url, SECRET).url) == url
