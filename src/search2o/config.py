"""Settings: one object, read from the environment and an optional TOML file, passed down.

Precedence (highest first): keyword arguments, ``SEARCH2O_*`` environment variables, the TOML
file (``SEARCH2O_CONFIG`` or ``<data_dir>/search2o.toml``), defaults. Nested fields use a double
underscore in the environment: ``SEARCH2O_EMBEDDING__PROVIDER=openai``.

Nothing here is read at import time; :func:`load_settings` builds a :class:`Settings` when the
CLI or the app factory starts.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from search2o import extensions
from search2o.chat.settings import RunSettings
from search2o.crypto.settings import KeySettings
from search2o.errors import ConfigError
from search2o.jobs.settings import JobSettings
from search2o.knowledge.settings import KnowledgeSettings
from search2o.memory.settings import MemorySettings
from search2o.netpolicy import is_loopback_host, url_problem
from search2o.observability.settings import MetricsSettings, TracingSettings
from search2o.providers.settings import EmbeddingSettings
from search2o.query.settings import (
    ChatSettings,
    RetentionSettings,
)
from search2o.state.settings import StateSettings

__all__ = [
    "ApiSettings",
    "CoreSettings",
    "OidcSettings",
    "ServeSettings",
    "Settings",
    "WebSettings",
    "assemble",
    "load_settings",
    "server_url",
]


class ApiSettings(BaseModel):
    """Bounds of the HTTP API on what a request may carry (docs/security.md).

    Bodies are counted while they stream in (``Content-Length`` is checked before the first
    byte is read); a body over its bound answers 413 and is not read further. In token mode a
    request without a valid token is refused with 401 before its body is read at all.
    """

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=1024**3, description="any JSON body, in bytes"
    )
    max_upload_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024,
        le=64 * 1024**3,
        description="POST /v1/documents: the whole multipart body, in bytes",
    )
    max_definition_bytes: int = Field(
        default=1_000_000, ge=1024, le=1024**3, description="PUT /v1/agents/{name}, in bytes"
    )
    max_json_depth: int = Field(
        default=64, ge=2, le=500, description="deepest nesting of arrays and objects in a body"
    )


class WebSettings(BaseModel):
    """Browser sign-in and its sessions (docs/webapp.md, "Sign-in"; docs/security.md).

    A session ends ``session_hours`` after sign-in whatever happens (absolute expiry) and
    ``idle_minutes`` after its last request (idle expiry; OWASP Session Management Cheat Sheet,
    "Session Expiration"). ``login_link_minutes`` is the default life of a link printed by
    ``search2o users login-link`` (at most ``MAX_LINK_MINUTES`` of
    :mod:`search2o.signin`). The cookie carries ``Secure`` unless the server binds a loopback
    address; ``behind_tls_proxy`` says a TLS proxy in front serves it as https (then the cookie
    is ``Secure`` on loopback too and the server's own origin is ``https://<Host>``).
    """

    model_config = ConfigDict(extra="forbid")

    session_hours: float = Field(
        default=12.0, gt=0, le=24 * 90, description="absolute life of a session, in hours"
    )
    idle_minutes: float = Field(
        default=120.0, gt=0, le=60 * 24 * 30, description="a session unused this long ends"
    )
    login_link_minutes: int = Field(
        default=15, ge=1, le=1440, description="default life of `users login-link` links"
    )
    behind_tls_proxy: bool = Field(
        default=False, description="a TLS proxy serves this server as https"
    )


class OidcSettings(BaseModel):
    """Web App sign-in with the company's identity provider (OpenID Connect Core 1.0).

    Off while ``issuer`` is unset. The provider is found by discovery (OpenID Connect
    Discovery 1.0) at ``<issuer>/.well-known/openid-configuration``; sign-in is the
    authorization code flow with PKCE S256 (RFC 7636), ``state`` and ``nonce``; the ID token is
    verified against the provider's JWKS (signature with one of ``mcp.oidc_algorithms``,
    ``iss``, ``aud`` = ``client_id``, ``exp`` with ``mcp.oidc_leeway_s``, ``nonce``).
    The user is the ``email_claim`` (created on first sign-in; refused when ``email_verified``
    is false); with ``groups_claim`` set, its groups replace the user's at every sign-in.
    ``redirect_url`` defaults to ``<public URL>/v1/auth/oidc/callback`` (the public URL is
    ``mcp.public_url``, else ``http://host:port``). The key cache and timeouts are MCP's
    (``mcp.oidc_timeout_s``, ``mcp.oidc_jwks_cache_s``): one provider, one set of keys.
    """

    model_config = ConfigDict(extra="forbid")

    issuer: str | None = Field(
        default=None, description="e.g. https://login.example.com/realms/staff"
    )
    client_id: str | None = Field(default=None, min_length=1, max_length=200)
    client_secret: SecretStr | None = Field(default=None, description="confidential clients")
    scopes: list[str] = Field(default_factory=lambda: ["openid", "email", "profile"], min_length=1)
    email_claim: str = Field(default="email", min_length=1, max_length=100)
    groups_claim: str | None = Field(
        default=None, min_length=1, max_length=100, description="e.g. groups"
    )
    redirect_url: str | None = Field(
        default=None, description="default <public URL>/v1/auth/oidc/callback"
    )

    @field_validator("issuer", "redirect_url")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The issuer is where signing keys come from: https, plain http to loopback only.
        if value is None:
            return None
        problem = url_problem(value, secure=info.field_name == "issuer", query=False)
        if problem is not None:
            raise ValueError(problem)
        return value.strip()

    @model_validator(mode="after")
    def _complete(self) -> OidcSettings:
        if self.issuer is not None and self.client_id is None:
            raise ValueError("oidc.issuer needs oidc.client_id (SEARCH2O_OIDC__CLIENT_ID)")
        if "openid" not in self.scopes:
            raise ValueError("oidc.scopes must include openid")
        return self


class ServeSettings(BaseModel):
    """How ``search2o serve`` runs its HTTP processes (docs/deployment.md).

    ``workers`` uvicorn worker processes share the listening socket; more than one needs
    PostgreSQL (SQLite is one writer on one host). On SIGTERM a process stops accepting
    connections and gives the responses in flight (event streams included) up to ``drain_s``
    seconds to finish; answers still running then are stopped with what they wrote stored
    (``interrupted``, followable from any process), and its job consumer finishes or releases
    its jobs (``jobs.shutdown_timeout_s``). ``ready_timeout_s`` bounds each readiness check of
    ``GET /v1/health/ready``. ``worker_healthcheck_s`` is how long uvicorn's supervisor waits
    for a worker process to answer its health check (uvicorn ``timeout_worker_healthcheck``)
    before it kills and replaces it; a worker starting (imports, migrations check, the
    embedding model) can take longer than uvicorn's 5 s default on a busy host.
    """

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(default=1, ge=1, le=64, description="HTTP worker processes")
    drain_s: int = Field(
        default=30, ge=0, le=3600, description="on SIGTERM: seconds for responses in flight"
    )
    ready_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="bound of each readiness check, in seconds"
    )
    worker_healthcheck_s: int = Field(
        default=60, ge=5, le=600, description="--workers: seconds a worker may not answer"
    )


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("search2o", appauthor=False))


class CoreSettings(BaseSettings):
    """Every core setting of a search2o process; :data:`Settings` adds the extensions' sections.

    Attributes:
        data_dir: where the SQLite file, keyrings and uploads live (platform user data folder).
        database_url: SQLAlchemy URL; default ``sqlite:///<data_dir>/search2o.db``; PostgreSQL as
            ``postgresql+psycopg://user:pass@host/db``.
        auth_mode: ``local`` = one local user, no token needed (embedded default); ``token`` =
            every request carries ``Authorization: Bearer <token>``.
        insecure_local_mode: allow ``auth_mode=local`` on a non-loopback ``host`` (every
            client there acts as the local admin); see :meth:`local_mode_problem`.
        log_format: ``json`` (one structured line per event) or ``text``.

    """

    model_config = SettingsConfigDict(
        env_prefix="SEARCH2O_", env_nested_delimiter="__", extra="forbid"
    )

    data_dir: Path = Field(default_factory=_default_data_dir)
    database_url: str | None = None
    auth_mode: Literal["local", "token"] = "local"
    local_user_email: str = "local@localhost"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    insecure_local_mode: bool = Field(
        default=False, description="serve local single-user mode beyond loopback anyway"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    keys: KeySettings = Field(default_factory=KeySettings)
    state: StateSettings = Field(default_factory=StateSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    runs: RunSettings = Field(default_factory=RunSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    oidc: OidcSettings = Field(default_factory=OidcSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order the sources: arguments, environment, then the TOML file (pydantic-settings)."""
        toml_path = _config_file_path()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    def local_mode_problem(self) -> str | None:
        """Return why these settings must not serve, or ``None`` when they may.

        Local single-user mode answers every tokenless request as the local admin, so it is
        for loopback only (:func:`~search2o.netpolicy.is_loopback_host`) unless
        ``insecure_local_mode`` says the operator accepts that. ``search2o serve`` and
        ``create_app`` both refuse with this text.
        """
        if self.auth_mode != "local" or self.insecure_local_mode or is_loopback_host(self.host):
            return None
        return (
            f"local single-user mode on {self.host}, which is not a loopback address, makes "
            "every client that can reach it an admin without a token: set "
            "SEARCH2O_AUTH_MODE=token (and add users), bind 127.0.0.1, or accept the risk with "
            "--insecure-local-mode (SEARCH2O_INSECURE_LOCAL_MODE=true)"
        )

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to the SQLite file in :attr:`data_dir`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'search2o.db'}"


def assemble(found: tuple[extensions.Extension, ...]) -> type[CoreSettings]:
    """Return the root settings class: :class:`CoreSettings` plus a field per extension section.

    Each extension with ``settings`` adds the field ``<name>`` (default: the section's
    defaults), read like a core section from ``SEARCH2O_<NAME>__*`` and ``[<name>]``.

    Raises:
        ConfigError: an extension's name is already a core setting.

    """
    fields: dict[str, Any] = {}
    for extension in found:
        if extension.settings is None:
            continue
        if extension.name in CoreSettings.model_fields:
            raise ConfigError(
                f"extension {extension.name!r} ({extensions.GROUP}) names a core setting; "
                "an extension's section needs a name of its own"
            )
        fields[extension.name] = (extension.settings, Field(default_factory=extension.settings))
    root = create_model(  # pydantic "Dynamic model creation"
        "Settings", __base__=CoreSettings, __module__=__name__, **fields
    )
    root.__doc__ = CoreSettings.__doc__
    return root


if TYPE_CHECKING:
    Settings = CoreSettings
else:
    Settings = assemble(extensions.discover())
"""The root settings: the core's sections and every installed extension's (:func:`assemble`)."""

_WILDCARD = frozenset({"0.0.0.0", "::", ""})
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def server_url(settings: Settings, *, for_people: bool = True) -> str:
    """Return ``http://host:port`` of the server as this machine reaches it.

    For people (``search2o serve``'s banner, the demo's last line) a loopback or wildcard bind
    address (``0.0.0.0``, ``::``: every address, loopback included) reads ``localhost``. For a
    process that calls the server (a surface's answer jobs, ``for_people=False``) a wildcard is
    reached at ``127.0.0.1`` and any other address as bound. An IPv6 address is put in brackets
    (RFC 3986, section 3.2.2).
    """
    host = settings.host
    if for_people and host in _WILDCARD | _LOOPBACK:
        host = "localhost"
    elif host in _WILDCARD:
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def _config_file_path() -> Path | None:
    explicit = os.environ.get("SEARCH2O_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"SEARCH2O_CONFIG points to {path}, which is not a file")
        return path
    data_dir = os.environ.get("SEARCH2O_DATA_DIR")
    candidate = (Path(data_dir) if data_dir else _default_data_dir()) / "search2o.toml"
    return candidate if candidate.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Build the settings from arguments, environment and TOML file.

    Every ``SEARCH2O_*`` environment variable must be a setting (``SEARCH2O_CONFIG`` and the
    KEK variable ``keys.env_var`` excepted) and every TOML key a field of its section: a typo
    such as ``SEARCH2O_AUTH_MOD=token`` would otherwise serve with the default it meant to
    change.

    Args:
        **overrides: field values that win over every other source.

    Returns:
        The validated :class:`Settings`.

    Raises:
        ConfigError: a value is invalid, or a variable or key is not a setting; the message
            names it, its source and the likely setting (``difflib`` close match).

    """
    import tomllib

    from pydantic import ValidationError

    toml_path = _config_file_path()
    try:
        settings = Settings(**overrides)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {toml_path} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(_describe(exc.errors()[0], toml_path)) from exc
    _check_environment(settings)
    return settings


_PREFIX = "SEARCH2O_"
_DELIMITER = "__"
# Variables the product reads on purpose that are not fields of Settings.
_NOT_SETTINGS = frozenset({"SEARCH2O_CONFIG"})


def _describe(error: Any, toml_path: Path | None) -> str:
    """One line for a pydantic error: the setting, the rule and where the value came from."""
    loc = tuple(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        env = _PREFIX + _DELIMITER.join(loc).upper()
        # SEARCH2O_CHAT__SEARCH__K arrives as the unknown field chat.search (holding k): name
        # the variable the user wrote, not the nested key pydantic-settings built from it.
        for name in sorted(os.environ):
            upper = name.upper()
            if upper == env or upper.startswith(env + _DELIMITER):
                return _unknown_variable(name)
        # Not in the environment: from the TOML file (or a keyword argument).
        section, key = ".".join(loc[:-1]), loc[-1]
        origin = f" in [{section}]" if section else ""
        if toml_path is not None:
            origin += f" of {toml_path}" if section else f" in {toml_path}"
        return f"unknown setting {key}{origin}{_did_you_mean(key, _fields_at(loc[:-1]))}"
    where = ".".join(loc) or "settings"
    message = error["msg"].removeprefix("Value error, ")
    sources = f"environment {_PREFIX}{where.upper().replace('.', _DELIMITER)}"
    if toml_path is not None:
        sources += f" or {where!r} in {toml_path}"
    return f"setting {where}: {message} ({sources})"


def _check_environment(settings: Settings) -> None:
    """Refuse a ``SEARCH2O_*`` variable that names no setting (pydantic-settings ignores it).

    Raises:
        ConfigError: the first such variable, in sorted order, with the likely setting.

    """
    allowed = _NOT_SETTINGS | {settings.keys.env_var.upper()}
    for name in sorted(os.environ):
        upper = name.upper()
        if upper.startswith(_PREFIX) and upper not in allowed and not _is_setting(upper):
            raise ConfigError(_unknown_variable(name))


def _unknown_variable(name: str) -> str:
    """``unknown setting NAME (did you mean SEARCH2O_...?)`` for an environment variable."""
    parts = name[len(_PREFIX) :].lower().split(_DELIMITER)
    problem = _first_unknown(parts)
    index, fields = problem if problem is not None else (len(parts), [])
    match = difflib.get_close_matches(parts[index], fields, n=1) if index < len(parts) else []
    if match:
        likely = _DELIMITER.join([*parts[:index], match[0]]).upper()
        return f"unknown setting {name} (did you mean {_PREFIX}{likely}?)"
    return f"unknown setting {name} (not a setting; they are listed in docs/configuration.md)"


def _did_you_mean(key: str, fields: list[str]) -> str:
    match = difflib.get_close_matches(key, fields, n=1)
    return f" (did you mean {match[0]}?)" if match else " (not a setting of this section)"


def _is_setting(variable: str) -> bool:
    """Whether ``SEARCH2O_A__B__C`` names a setting: a path of fields (dict keys are free)."""
    return _first_unknown(variable[len(_PREFIX) :].lower().split(_DELIMITER)) is None


def _first_unknown(parts: list[str]) -> tuple[int, list[str]] | None:
    """Walk ``parts`` down :class:`Settings`; return the first that names nothing there.

    Returns:
        ``None`` when every part is a field (or a key of a dict-valued field, such as a
        profile's or a plan's name); else the index of the first bad part and the field names
        it could have meant (none below a scalar, which has no parts).

    """
    node: Any = Settings
    for index, part in enumerate(parts):
        model = _model_of(node)
        if model is not None:
            if part not in model.model_fields:
                return index, list(model.model_fields)
            node = model.model_fields[part].annotation
        elif _dict_value(node) is not None:
            node = _dict_value(node)
        else:
            return index, []
    return None


def _fields_at(path: tuple[str, ...]) -> list[str]:
    """Return the field names of the section at ``path`` (a TOML table), or none."""
    node: Any = Settings
    for part in path:
        model = _model_of(node)
        if model is not None and part in model.model_fields:
            node = model.model_fields[part].annotation
        elif model is None and _dict_value(node) is not None:
            node = _dict_value(node)
        else:
            return []
    model = _model_of(node)
    return list(model.model_fields) if model is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """Return the settings model an annotation holds (``X`` or ``X | None``), else ``None``."""
    candidates = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else (annotation,)
    )
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _dict_value(annotation: Any) -> Any | None:
    """Return the value type of a ``dict[str, X]`` annotation, else ``None``."""
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[1]
    return None
