"""Settings: environment prefix, TOML file, precedence and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from search2o.config import load_settings
from search2o.errors import ConfigError


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
    with pytest.raises(ConfigError, match="available: builtin, openai"):
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
