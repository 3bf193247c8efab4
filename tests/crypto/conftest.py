"""Fixtures of the crypto tests: a real key service on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.crypto.keyservice import KeyService, running

SECRET = "s3cret-shared-with-the-key-service"


@pytest.fixture
def key_service() -> Iterator[tuple[KeyService, str]]:
    """A running key service and its base URL; requests must be signed with ``SECRET``."""
    with running(SECRET) as started:
        yield started
