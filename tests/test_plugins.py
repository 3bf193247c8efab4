"""The one plugin loader: every entry point group, one message for an unknown name."""

from __future__ import annotations

import pytest

from search2o.errors import ConfigError
from search2o.plugins import check_members, installed, load_factory, require_extra

GROUPS = {
    "search2o.embedders": {"builtin", "openai"},
    "search2o.chat_models": {"builtin", "openai"},
    "search2o.key_providers": {"env", "http", "local"},
    "search2o.web_search": {"searxng"},
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_the_built_in_providers_are_registered_like_any_plugin(group: str) -> None:
    assert GROUPS[group] <= set(installed(group))
    for name in GROUPS[group]:
        assert callable(load_factory(group, name, "some.setting"))


def test_an_unknown_name_names_the_setting_and_what_is_installed() -> None:
    with pytest.raises(ConfigError) as caught:
        load_factory("search2o.embedders", "nosuch", "embedding.provider")
    assert caught.value.message == (
        "setting embedding.provider: 'nosuch' is not installed in search2o.embedders "
        "(installed: builtin, openai)"
    )


def test_missing_members_are_named_without_evaluating_properties() -> None:
    class Probe:
        evaluated = False

        @property
        def model_id(self) -> str:
            Probe.evaluated = True
            return "x"

    check_members(Probe(), ("model_id",), "probe")
    assert not Probe.evaluated
    with pytest.raises(ConfigError, match="probe has no embed, dimension; it must provide"):
        check_members(Probe(), ("model_id", "embed", "dimension"), "probe")


def test_an_extra_that_is_not_installed_is_named_with_its_pip_install() -> None:
    require_extra("mcp", "the MCP server", "json")  # importable: nothing happens
    with pytest.raises(ConfigError) as caught:
        require_extra("slack", "the Slack surface", "json", "no_such_module_s2o")
    assert caught.value.message.startswith(
        "the Slack surface needs the `slack` extra (no_such_module_s2o cannot be imported: "
    )
    assert caught.value.message.endswith("pip install 'search2o[slack]'")
