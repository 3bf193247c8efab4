"""The public namespace of the Telegram surface, and its settings' checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import search2o.surfaces.telegram as package
from search2o.config import Settings, TelegramSettings
from search2o.surfaces.telegram.botapi import bot_id_of


def test_the_public_names_resolve_once_each() -> None:
    # their order is ruff's RUF022 (constants, classes, functions), checked by the lint gate
    assert len(set(package.__all__)) == len(package.__all__)
    assert {"TelegramPipeline", "TelegramWebhook", "Poller", "check"} <= set(package.__all__)
    for name in package.__all__:
        assert getattr(package, name) is not None, name


@pytest.mark.parametrize(
    ("values", "field", "reason"),
    [
        ({"secret_token": "has space"}, "secret_token", "A-Z, a-z, 0-9, _ or -"),
        ({"secret_token": "x" * 257}, "secret_token", "1-256 characters"),
        ({"bot_username": "no"}, "bot_username", "4-32 letters"),
        ({"api_url": "http://api.telegram.org/"}, "api_url", "https"),
        ({"update_every_s": -1}, "update_every_s", "greater than or equal to 0"),
        # the missing secret is the field named, not the whole section
        ({"bot_token": "1:a", "mode": "webhook"}, "telegram.secret_token", "webhook needs it"),
        ({"modes": "polling"}, "modes", "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_name_the_field_and_the_reason(
    values: dict[str, object], field: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(telegram=values)
    message = str(raised.value)
    assert field in message and reason in message, message


def test_a_username_may_be_given_with_its_at_sign() -> None:
    assert TelegramSettings(bot_username="@acme_bot").bot_username == "acme_bot"
    assert not TelegramSettings().configured


def test_the_bot_id_is_the_token_prefix() -> None:
    assert bot_id_of("123456:AAH-x") == "123456"
    for bad in ("123456", ":abc", "abc:def", "123:"):
        with pytest.raises(ValueError, match="looks like"):
            bot_id_of(bad)
