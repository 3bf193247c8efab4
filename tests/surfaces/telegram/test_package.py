"""The registration of the Telegram surface, and its settings' checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import search2o.surfaces.telegram as package
from search2o.config import Settings
from search2o.extensions import discover
from search2o.surfaces.telegram.botapi import bot_id_of
from search2o.surfaces.telegram.settings import TelegramSettings


def test_it_registers_as_an_extension_with_its_section_kinds_routes_and_commands() -> None:
    extension = {found.name: found for found in discover()}["telegram"]
    assert extension.settings is TelegramSettings
    assert extension.add_kinds and extension.add_routes and extension.add_commands
    assert package.__doc__ and not hasattr(package, "__all__")  # re-exports nothing


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
