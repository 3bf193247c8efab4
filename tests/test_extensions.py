"""The one registry of extensions: built-ins and a third-party package plug in the same way."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from search2o.config import CoreSettings, Settings, assemble
from search2o.errors import ConfigError
from search2o.extensions import Extension, OpenRoute, discover, load_extensions

BUILT_INS = {"mattermost", "mcp", "slack", "telegram"}


class Lax(BaseModel):
    """A section that would accept any typo."""

    greeting: str = "hi"


class AcmeSettings(BaseModel):
    """A section of a made-up extension."""

    model_config = ConfigDict(extra="forbid")
    greeting: str = "hi"


def test_the_built_in_surfaces_are_registered_like_any_extension() -> None:
    found = {extension.name: extension for extension in discover()}
    assert set(found) >= BUILT_INS
    for name in BUILT_INS:
        assert found[name].settings is not None
        assert name in Settings.model_fields  # the root assembled their sections
        assert name not in CoreSettings.model_fields  # ...which the core does not declare


def test_loading_the_registry_imports_no_surface_beyond_its_settings(tmp_path: Path) -> None:
    # The root settings load every extension while they are built: an extension module that
    # imported its surface would pull the engines into the settings (and an import cycle).
    code = (
        "import sys, search2o.config, json; print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith('search2o.surfaces.'))))"
    )
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code], text=True)))
    surfaces = {m for m in loaded if m.split(".")[2] in BUILT_INS}  # not the shared modules
    allowed = {
        f"search2o.surfaces.{name}{part}"
        for name in BUILT_INS
        for part in ("", ".extension", ".settings")
    }
    assert surfaces == allowed, sorted(surfaces ^ allowed)


@pytest.mark.parametrize(
    ("found", "message"),
    [
        ({"acme": object()}, "extension 'acme' (search2o.extensions) is a object, not a search2o"),
        ({"Acme": Extension("Acme")}, "name 'Acme' must match"),
        ({"acme": Extension("other")}, "its name is 'other'; the entry point must match"),
        ({"acme": Extension("acme", settings=dict)}, "settings must be a pydantic model"),  # type: ignore[arg-type]
        ({"acme": Extension("acme", settings=Lax)}, "must refuse unknown keys"),
    ],
)
def test_a_bad_extension_is_refused_naming_its_entry_point(
    found: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_extensions(found)


def test_an_extension_may_not_take_a_core_sections_name() -> None:
    with pytest.raises(ConfigError, match=r"extension 'chat' .* names a core setting"):
        assemble((Extension("chat", settings=AcmeSettings),))


def test_an_extension_section_is_as_strict_as_a_core_one() -> None:
    root = assemble((Extension("acme", settings=AcmeSettings),))
    assert root(acme={"greeting": "hello"}).acme.greeting == "hello"  # type: ignore[attr-defined]
    assert root().acme.greeting == "hi"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="greetingg"):
        root(acme={"greetingg": "x"})
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        root(nosuch={})


THIRD_PARTY = '''
"""A customer's extension, installed as its own distribution."""
from pydantic import BaseModel, ConfigDict
import typer
from search2o.extensions import Extension, OpenRoute
from search2o.settings_base import section_of

class AcmeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    greeting: str = "hi"

def _add_kinds(registry, runtime):
    registry.add("acme.ping", lambda ctx, payload: {"pong": True})

def _add_commands(cli):
    @cli.command("acme")
    def acme() -> None:
        from search2o.cli.common import settings
        print(section_of(settings(), "acme", AcmeSettings).greeting)

def verify_hook(request) -> bool:
    return request.headers.get("x-acme-signature") == "signed"

def _add_routes(app, runtime):
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def hello(request):
        return JSONResponse({"secret": "acme data"})

    async def hook(request):
        return Response(status_code=204 if verify_hook(request) else 401)

    app.router.routes.extend([Route("/acme/hello", hello), Route("/acme/hook", hook,
                                                                   methods=["POST"])])

EXTENSION = Extension("acme", settings=AcmeSettings, add_kinds=_add_kinds,
                      add_commands=_add_commands, add_routes=_add_routes,
                      open_routes=(OpenRoute("/acme/hook", verifier="acme_ext:verify_hook"),))
'''


@pytest.fixture
def third_party(tmp_path: Path) -> dict[str, str]:
    """A distribution ``acme-ext`` on ``PYTHONPATH`` whose entry point names its extension."""
    (tmp_path / "acme_ext.py").write_text(textwrap.dedent(THIRD_PARTY))
    dist = tmp_path / "acme_ext-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-ext\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[search2o.extensions]\nacme = acme_ext:EXTENSION\n")
    data = tmp_path / "data"
    return {"PYTHONPATH": str(tmp_path), "SEARCH2O_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"}


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


CLI = "from search2o.cli import main; import sys; sys.argv[0] = 'search2o'; main()"


def test_a_third_party_extension_adds_a_section_a_command_and_a_kind(
    third_party: dict[str, str],
) -> None:
    # Nothing in search2o names it: the entry point alone wires its settings, CLI and jobs.
    env = {**third_party, "SEARCH2O_ACME__GREETING": "hello from acme"}
    ran = _run(CLI.replace("main()", "sys.argv[1:] = ['acme']; main()"), env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "hello from acme"
    kinds = _run(
        "from search2o.runtime import Runtime; from search2o.config import load_settings;"
        "from search2o.jobs.kinds import build_registry\n"
        "with Runtime(load_settings()) as rt:\n"
        "    print(build_registry(rt).get('acme.ping') is not None)",
        third_party,
    )
    assert kinds.returncode == 0, kinds.stderr
    assert kinds.stdout.strip() == "True"


def test_a_typo_in_a_third_party_section_is_named_like_a_core_one(
    third_party: dict[str, str],
) -> None:
    env = {**third_party, "SEARCH2O_ACME__GREETINGG": "x"}
    ran = _run(CLI.replace("main()", "sys.argv[1:] = ['acme']; main()"), env)
    assert ran.returncode == 2
    assert "unknown setting SEARCH2O_ACME__GREETINGG (did you mean SEARCH2O_ACME__GREETING?)" in (
        ran.stderr + ran.stdout
    )


def test_a_third_party_extension_that_fails_to_import_is_named(tmp_path: Path) -> None:
    dist = tmp_path / "broken_ext-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-ext\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[search2o.extensions]\nbroken = no_such_module:X\n")
    env = {
        "PYTHONPATH": str(tmp_path),
        "SEARCH2O_DATA_DIR": str(tmp_path / "d"),
        "PATH": "/usr/bin",
    }
    ran = _run("from search2o import Settings", env)  # the settings root assembles extensions
    assert ran.returncode != 0
    assert "extension 'broken' (search2o.extensions, no_such_module:X) failed to load" in ran.stderr


def test_a_section_that_is_not_installed_is_named() -> None:
    from search2o.settings_base import section_of

    assert section_of(Settings(), "slack", type(Settings().slack)) is not None  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="settings section 'acme' is not a AcmeSettings: the"):
        section_of(Settings(), "acme", AcmeSettings)


def test_a_third_party_route_needs_a_caller_unless_declared_a_signed_webhook(
    third_party: dict[str, str],
) -> None:
    # In token mode, as /v1/me: the extension's own route answers no one without a token; its
    # declared webhook reaches its handler, which verifies the request itself.
    code = (
        "from fastapi.testclient import TestClient\n"
        "from search2o.api.app import create_app\n"
        "from search2o.config import load_settings\n"
        "with TestClient(create_app(load_settings())) as client:\n"
        "    print(client.get('/acme/hello').status_code, client.get('/v1/me').status_code,\n"
        "          client.post('/acme/hook', headers={'x-acme-signature': 'signed'}).status_code,\n"
        "          client.post('/acme/hook').status_code)\n"
    )
    ran = _run(code, {**third_party, "SEARCH2O_AUTH_MODE": "token"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["401", "401", "204", "401"]


@pytest.mark.parametrize(
    ("route", "problem"),
    [
        (OpenRoute("/hook"), "needs its verifier"),
        (OpenRoute("/hook", verifier="not a reference"), "must be 'module:function'"),
        (OpenRoute("/v1/hook", verifier="acme:verify"), "outside /v1/"),
        (OpenRoute("/hook", verifier="acme:verify", public="and public"), "needs its verifier"),
    ],
)
def test_an_open_route_without_its_verifier_is_refused(route: OpenRoute, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_extensions({"acme": Extension("acme", open_routes=(route,))})


def test_a_verifier_that_does_not_import_stops_the_app(third_party: dict[str, str]) -> None:
    broken = THIRD_PARTY.replace('verifier="acme_ext:verify_hook"', 'verifier="acme_ext:gone"')
    (Path(third_party["PYTHONPATH"]) / "acme_ext.py").write_text(textwrap.dedent(broken))
    ran = _run(
        "from search2o.api.app import create_app\n"
        "from search2o.config import load_settings\n"
        "create_app(load_settings())",
        third_party,
    )
    assert ran.returncode != 0
    assert "extension 'acme', route '/acme/hook': its verifier 'acme_ext:gone'" in ran.stderr
