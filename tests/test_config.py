"""Settings: environment prefix, TOML file, precedence and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from search2o.config import Settings, load_settings, server_url
from search2o.errors import ConfigError
from search2o.query.settings import ModelProfile


def test_defaults_put_the_sqlite_file_in_the_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'search2o.db'}"
    assert settings.auth_mode == "local"
    assert settings.embedding.provider == "builtin"


def test_environment_overrides_toml_and_nested_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "search2o.toml"
    config.write_text('auth_mode = "token"\nport = 9000\n[knowledge]\nchunk_tokens = 300\n')
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert (settings.auth_mode, settings.port, settings.knowledge.chunk_tokens) == (
        "token",
        9000,
        300,
    )
    monkeypatch.setenv("SEARCH2O_PORT", "9100")
    monkeypatch.setenv("SEARCH2O_KNOWLEDGE__CHUNK_TOKENS", "120")
    settings = load_settings()
    assert (settings.port, settings.knowledge.chunk_tokens) == (9100, 120)
    assert load_settings(port=9200).port == 9200


def test_explicit_config_file_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEARCH2O_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        load_settings()


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("SEARCH2O_PORT", "70000", "port"),
        ("SEARCH2O_AUTH_MODE", "open", "auth_mode"),
        ("SEARCH2O_KNOWLEDGE__OVERLAP_TOKENS", "150", "knowledge"),
        ("SEARCH2O_OIDC__ISSUER", "https://login.example.com", "oidc.issuer needs oidc.client_id"),
        ("SEARCH2O_OIDC__ISSUER", "http://login.example.com", "oidc.issuer"),
        ("SEARCH2O_WEB__IDLE_MINUTES", "0", "web.idle_minutes"),
    ],
)
def test_bad_values_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str, value: str, needle: str
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=needle):
        load_settings()


def test_unknown_embedding_provider_is_a_config_error(tmp_path: Path) -> None:
    from search2o.providers.embeddings import build_embedder

    settings = load_settings(data_dir=tmp_path)
    with pytest.raises(ConfigError, match="installed: builtin, openai"):
        build_embedder(settings.embedding.model_copy(update={"provider": "nope"}))


def test_openai_embedder_needs_an_endpoint(tmp_path: Path) -> None:
    from search2o.providers.embeddings import build_embedder

    settings = load_settings(data_dir=tmp_path)
    with pytest.raises(ConfigError, match="SEARCH2O_EMBEDDING__BASE_URL"):
        build_embedder(settings.embedding.model_copy(update={"provider": "openai"}))


def test_malformed_toml_names_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "search2o.toml").write_text('auth_mode = "token\n')
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"search2o\.toml is not valid TOML"):
        load_settings()


def test_a_typo_in_the_toml_file_names_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "search2o.toml").write_text('auth_mod = "token"\n')
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"auth_mod.*search2o\.toml"):
        load_settings()


def test_a_data_dir_that_cannot_be_created_is_a_config_error(tmp_path: Path) -> None:
    from search2o.storage.db import Database

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="SEARCH2O_DATA_DIR"):
        Database(f"sqlite:///{blocker / 'search2o.db'}")


# ---------------------------------------------------------------------------------------------
# unknown settings are refused, never ignored
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "value", "suggestion"),
    [
        ("SEARCH2O_AUTH_MOD", "token", "SEARCH2O_AUTH_MODE"),
        ("search2o_auth_mod", "token", "SEARCH2O_AUTH_MODE"),
        ("SEARCH2O_CHAT__SEARCH_KK", "3", "SEARCH2O_CHAT__SEARCH_K"),
        # a delimiter too many: parsed as the nested, unknown chat.search
        ("SEARCH2O_CHAT__SEARCH__K", "3", "SEARCH2O_CHAT__SEARCH_K"),
        ("SEARCH2O_KNOWLEDGE__CHUNK_TOKEN", "300", "SEARCH2O_KNOWLEDGE__CHUNK_TOKENS"),
        ("SEARCH2O_CHAT__WEB_SEARCH__PROVIDR", "searxng", "SEARCH2O_CHAT__WEB_SEARCH__PROVIDER"),
        (
            "SEARCH2O_CHAT__PROFILES__FAST__PROVIDR",
            "builtin",
            "SEARCH2O_CHAT__PROFILES__FAST__PROVIDER",
        ),
        ("SEARCH2O_STATE__HOOK", "https://hooks.example.com", "SEARCH2O_STATE__HOOKS"),
    ],
)
def test_an_unknown_environment_variable_is_refused_with_the_likely_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str, value: str, suggestion: str
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.message == f"unknown setting {env} (did you mean {suggestion}?)"


@pytest.mark.parametrize("env", ["SEARCH2O_WHATEVER", "SEARCH2O_PORT__EXTRA", "SEARCH2O_"])
def test_an_unknown_environment_variable_without_a_close_setting_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv(env, "1")
    with pytest.raises(ConfigError, match=f"^unknown setting {env} .*configuration.md"):
        load_settings()


def test_variables_read_on_purpose_are_not_settings_but_allowed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "custom.toml"
    config.write_text('[keys]\nenv_var = "SEARCH2O_SITE_KEK"\n')
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SEARCH2O_CONFIG", str(config))
    monkeypatch.setenv("SEARCH2O_SITE_KEK", "not read unless keys.provider is env")
    assert load_settings().keys.env_var == "SEARCH2O_SITE_KEK"
    # the default KEK variable is unknown once keys.env_var names another one
    monkeypatch.setenv("SEARCH2O_KEK", "x")
    with pytest.raises(ConfigError, match="unknown setting SEARCH2O_KEK"):
        load_settings()
    monkeypatch.delenv("SEARCH2O_CONFIG")
    monkeypatch.delenv("SEARCH2O_SITE_KEK")
    assert load_settings().keys.env_var == "SEARCH2O_KEK"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[chat]\nsearch_kk = 3\n", "unknown setting search_kk in [chat] of {file}"),
        (
            "[knowledge]\nchunk_token = 300\n",
            "unknown setting chunk_token in [knowledge] of {file}",
        ),
        (
            '[chat.profiles.fast]\nprovidr = "builtin"\n',
            "unknown setting providr in [chat.profiles.fast] of {file}",
        ),
        ('auth_mod = "token"\n', "unknown setting auth_mod in {file}"),
    ],
)
def test_an_unknown_key_in_the_toml_file_names_the_key_and_its_section(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, toml: str, message: str
) -> None:
    config = tmp_path / "search2o.toml"
    config.write_text(toml)
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.message.startswith(message.format(file=config) + " (did you mean ")


def test_every_settings_section_refuses_unknown_keys() -> None:
    # Every model reachable from the root, wherever its section lives (core packages,
    # extensions) and however nested (a dict of model profiles).
    import typing

    from pydantic import BaseModel

    from search2o.config import Settings

    sections: dict[str, type[BaseModel]] = {}
    waiting: list[object] = [field.annotation for field in Settings.model_fields.values()]
    while waiting:
        annotation = waiting.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ not in sections:
                sections[annotation.__name__] = annotation
                waiting += [field.annotation for field in annotation.model_fields.values()]
        else:
            waiting += list(typing.get_args(annotation))
    assert {"KnowledgeSettings", "ModelProfile", "SlackSettings", "McpSettings"} <= set(sections)
    assert len(sections) >= 20
    assert {name: s.model_config.get("extra") for name, s in sections.items()} == {
        name: "forbid" for name in sections
    }


# ---------------------------------------------------------------------------------------------
# chat profiles
# ---------------------------------------------------------------------------------------------


def test_a_profile_defined_in_the_environment_keeps_the_builtin_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SEARCH2O_CHAT__PROFILES__FAST__PROVIDER", "builtin")
    monkeypatch.setenv("SEARCH2O_CHAT__PROFILES__FAST__CONTEXT_TOKENS", "4096")
    settings = load_settings()
    assert sorted(settings.chat.profiles) == ["default", "fast"]
    assert settings.chat.active_profile == ModelProfile()
    assert settings.chat.profiles["fast"].context_tokens == 4096
    monkeypatch.setenv("SEARCH2O_CHAT__PROFILE", "fast")
    assert load_settings().chat.active_profile.context_tokens == 4096


def test_a_profile_defined_in_the_toml_file_keeps_the_builtin_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "search2o.toml").write_text(
        '[chat.profiles.big]\nprovider = "openai"\nbase_url = "http://localhost:8080/v1"\n'
    )
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert sorted(settings.chat.profiles) == ["big", "default"]
    assert settings.chat.profiles["default"] == ModelProfile()


def test_the_default_profile_may_still_be_redefined(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SEARCH2O_CHAT__PROFILES__DEFAULT__CONTEXT_TOKENS", "16000")
    profiles = load_settings().chat.profiles
    assert list(profiles) == ["default"]
    assert profiles["default"].context_tokens == 16000


@pytest.mark.parametrize(
    ("host", "people", "process"),
    [
        ("127.0.0.1", "http://localhost:8000", "http://127.0.0.1:8000"),
        ("::1", "http://localhost:8000", "http://[::1]:8000"),
        ("0.0.0.0", "http://localhost:8000", "http://127.0.0.1:8000"),
        ("::", "http://localhost:8000", "http://127.0.0.1:8000"),
        ("10.0.0.5", "http://10.0.0.5:8000", "http://10.0.0.5:8000"),
        ("fd00::5", "http://[fd00::5]:8000", "http://[fd00::5]:8000"),
    ],
)
def test_the_server_url_is_what_people_open_and_what_a_process_connects_to(
    host: str, people: str, process: str
) -> None:
    settings = Settings(host=host, port=8000)
    assert server_url(settings) == people
    assert server_url(settings, for_people=False) == process


@pytest.mark.parametrize(
    ("section", "edit_pause"), [("slack", 1.0), ("telegram", 1.5), ("mattermost", 1.0)]
)
def test_the_shared_messenger_settings_keep_each_sections_names_and_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, section: str, edit_pause: float
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no search2o.toml here
    defaults = getattr(load_settings(), section)
    assert (defaults.server_url, defaults.service_token, defaults.unlinked) == (
        None,
        None,
        "channel",
    )
    assert defaults.update_every_s == edit_pause
    prefix = f"SEARCH2O_{section.upper()}__"
    monkeypatch.setenv(prefix + "SERVER_URL", "https://search.example.com/")
    monkeypatch.setenv(prefix + "SERVICE_TOKEN", "s2o_surface_token")
    monkeypatch.setenv(prefix + "UNLINKED", "link_only")
    monkeypatch.setenv(prefix + "UPDATE_EVERY_S", "2.5")
    loaded = getattr(load_settings(), section)
    assert loaded.server_url == "https://search.example.com"
    assert loaded.service_token is not None
    assert loaded.service_token.get_secret_value() == "s2o_surface_token"
    assert (loaded.unlinked, loaded.update_every_s) == ("link_only", 2.5)
    monkeypatch.setenv(prefix + "SERVER_URL", "http://search.example.com")  # token in clear
    with pytest.raises(ConfigError, match=f"{section}.server_url"):
        load_settings()


@pytest.mark.parametrize(
    ("field", "value", "belongs"),
    [("BOT_TOKEN", "xapp-1-A0-123-abc", "app_token"), ("APP_TOKEN", "xoxb-123-abc", "bot_token")],
)
def test_swapped_slack_tokens_are_refused_naming_the_field_and_the_swap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, field: str, value: str, belongs: str
) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(f"SEARCH2O_SLACK__{field}", value)
    with pytest.raises(ConfigError) as raised:
        load_settings()
    message = str(raised.value)
    assert message.startswith(f"setting slack.{field.lower()}: holds an {value[:5]} token")
    assert f"belongs in slack.{belongs}: the two are swapped" in message
    assert message.endswith(f"(environment SEARCH2O_SLACK__{field})")
    assert value not in message  # the token itself never shows
