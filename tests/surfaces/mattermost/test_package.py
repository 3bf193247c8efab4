"""The public namespace of the Mattermost surface, and its settings' checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import search2o.surfaces.mattermost as package
from search2o.config import MattermostSettings, Settings


def test_the_public_names_resolve_once_each() -> None:
    assert len(set(package.__all__)) == len(package.__all__)
    assert {"MattermostPipeline", "MattermostIngress", "Listener", "check"} <= set(package.__all__)
    for name in package.__all__:
        assert getattr(package, name) is not None, name


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
