"""The registration of the Mattermost surface, and its settings' checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import search2o.surfaces.mattermost as package
from search2o.config import Settings
from search2o.extensions import discover
from search2o.surfaces.mattermost.settings import MattermostSettings


def test_it_registers_as_an_extension_with_its_section_kinds_routes_and_commands() -> None:
    extension = {found.name: found for found in discover()}["mattermost"]
    assert extension.settings is MattermostSettings
    assert extension.add_kinds and extension.add_routes and extension.add_commands
    assert package.__doc__ and not hasattr(package, "__all__")  # re-exports nothing


@pytest.mark.parametrize(
    ("values", "field", "reason"),
    [
        ({"url": "http://chat.example.com"}, "url", "https"),
        ({"command_token": "short"}, "command_token", "the token Mattermost shows"),
        ({"update_every_s": -1}, "update_every_s", "greater than or equal to 0"),
        ({"watchdog_s": 0}, "watchdog_s", "greater than 0"),
        ({"bot_tokens": "x"}, "bot_tokens", "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_name_the_field_and_the_reason(
    values: dict[str, object], field: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(mattermost=values)
    message = str(raised.value)
    assert field in message and reason in message, message


def test_it_is_on_with_a_url_and_a_bot_token() -> None:
    assert not MattermostSettings().configured
    assert not MattermostSettings(url="https://chat.example.com").configured
    on = MattermostSettings(url="https://chat.example.com/", bot_token="t" * 26)
    assert on.configured and on.url == "https://chat.example.com"
