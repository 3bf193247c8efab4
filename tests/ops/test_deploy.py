"""The files of ``deploy/`` checked as far as a machine without a container engine allows.

* ``compose.yaml`` against the Compose Specification's JSON Schema (vendored, see
  tests/ops/data/README.md), with its profiles as docs/deployment.md describes them;
* every ``SEARCH2O_*`` variable the files set is a setting and its value loads
  (:func:`load_settings`, which refuses unknown names), and every ``search2o`` command line they
  run parses with the real CLI;
* the Dockerfile: two stages, the README's install steps, a non-root user, a health check on a
  route the app serves;
* the native recipe: the Procfile run for real by honcho on loopback against PostgreSQL (two
  API processes and a worker), a chat through each API process and an upload ingested by the
  worker, then SIGTERM stops them all.

Not run here: ``docker build``, ``docker compose config``/``up``, nginx, systemd.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import httpx
import jsonschema
import pytest
import typer.main
import yaml

from search2o.api.app import create_app
from search2o.cli import app as cli_app
from search2o.config import Settings, load_settings
from search2o.runtime import Runtime
from tests.api.test_api import add_user, serve
from tests.conftest import free_port
from tests.ops.processes import process_env, wait_ready

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEMA = Path(__file__).parent / "data" / "compose-spec.json"
SECRETS = {
    "POSTGRES_PASSWORD": "pg-secret-for-tests",
    "SEARCH2O_KEK": base64.b64encode(bytes(range(32))).decode(),
    "METRICS_TOKEN": "metrics-token-0123456789",
}
_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}")


def compose() -> dict[str, Any]:
    """The compose file as YAML gives it (merge keys resolved by the loader)."""
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Substitute ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` (Compose spec).

    Through strings, lists and mappings ("Interpolation"); an unset required one fails.
    """
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if kind == "-":
            return rest
        raise AssertionError(f"${{{name}}} is required: {rest}")

    return _VARIABLE.sub(one, value)


def test_the_compose_file_follows_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(compose()), key=lambda e: list(e.path))
    assert errors == [], [f"{list(e.path)}: {e.message}" for e in errors]
    # The check can fail: a misspelt service key is refused.
    broken = compose()
    broken["services"]["api"]["stop_grace"] = "45s"
    assert any("stop_grace" in e.message for e in validator.iter_errors(broken))


def test_the_profiles_are_embedded_scale_and_redis() -> None:
    services = compose()["services"]
    by_profile: dict[str, set[str]] = {}
    for name, service in services.items():
        for profile in service["profiles"]:
            by_profile.setdefault(profile, set()).add(name)
    assert by_profile == {
        "embedded": {"search2o"},
        "scale": {"migrate", "api", "worker", "lb", "postgres"},
        "redis": {"redis"},
    }
    embedded = services["search2o"]
    assert embedded["volumes"] == ["search2o-data:/data"]  # one volume
    assert "SEARCH2O_DATABASE_URL" not in embedded["environment"]  # SQLite in the volume
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    scale = interpolate(services["api"], SECRETS)
    assert scale["deploy"]["replicas"] == "2"
    assert scale["command"] == ["serve", "--workers", "2"]
    assert (
        interpolate(services["worker"], {**SECRETS, "WORKER_REPLICAS": "5"})["deploy"]["replicas"]
        == "5"
    )
    assert scale["environment"]["SEARCH2O_JOBS__SERVER_WORKERS"] == "0"


def _environments() -> dict[str, dict[str, str]]:
    """Every environment the deploy files give a search2o process, by where it comes from."""
    found: dict[str, dict[str, str]] = {}
    services = interpolate(compose()["services"], SECRETS)
    for name in ("search2o", "migrate", "api", "worker"):
        found[f"compose {name}"] = {k: str(v) for k, v in services[name]["environment"].items()}
    docker = dict(re.findall(r"(SEARCH2O_[A-Z0-9_]+)=(\S+)", (DEPLOY / "Dockerfile").read_text()))
    found["Dockerfile"] = docker
    example = {}
    for line in (DEPLOY / "search2o.env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            example[key] = value
    found["search2o.env.example"] = example
    return found


@pytest.mark.parametrize("where", sorted(_environments()))
def test_every_variable_the_files_set_is_a_setting_that_loads(
    where: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = _environments()[where]
    assert env, where
    for name in [n for n in os.environ if n.startswith("SEARCH2O_")]:
        monkeypatch.delenv(name)
    (tmp_path / "empty.toml").write_text("")
    monkeypatch.setenv("SEARCH2O_CONFIG", str(tmp_path / "empty.toml"))
    for name, value in env.items():
        monkeypatch.setenv(name, value.replace("/data", str(tmp_path)))
    settings = load_settings()  # ConfigError on an unknown name or a bad value
    assert settings.auth_mode == "token"
    if "SEARCH2O_DATABASE_URL" in env:
        assert settings.resolved_database_url.startswith("postgresql+psycopg://")
    if "SEARCH2O_METRICS__TOKEN" in env:
        assert settings.metrics.token is not None


def _command_lines() -> dict[str, list[str]]:
    """Every ``search2o`` command line the deploy files run, without the program name."""
    lines: dict[str, list[str]] = {}
    services = interpolate(compose()["services"], SECRETS)
    for name in ("search2o", "migrate", "api", "worker"):
        lines[f"compose {name}"] = [str(part) for part in services[name]["command"]]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    entry = json.loads(re.search(r"^ENTRYPOINT (.+)$", dockerfile, re.M).group(1))  # type: ignore[union-attr]
    assert entry == ["search2o"]
    lines["Dockerfile CMD"] = json.loads(re.search(r"^CMD (.+)$", dockerfile, re.M).group(1))  # type: ignore[union-attr]
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        exec_start = re.search(r"^ExecStart=(\S+) (.+)$", unit.read_text(), re.M)
        assert exec_start is not None and exec_start.group(1).endswith("/bin/search2o"), unit
        lines[unit.name] = shlex.split(exec_start.group(2).replace("%i", "8001"))
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if line and not line.startswith("#"):
            kind, _, command = line.partition(": ")
            words = shlex.split(command.replace("$PORT", "5000"))
            assert words[0] == "search2o", line
            lines[f"Procfile {kind}"] = words[1:]
    return lines


@pytest.mark.parametrize("where", sorted(_command_lines()))
def test_every_command_the_files_run_parses(where: str) -> None:
    words = _command_lines()[where]
    group = typer.main.get_command(cli_app)
    command: click.Command = group
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        name, words = words[0], words[1:]
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"{where}: no command {name!r}"
        command = found
    assert not isinstance(command, click.Group), f"{where}: a group, not a command"
    command.make_context(command.name or "search2o", list(words))  # UsageError if unknown


def test_the_dockerfile_builds_in_two_stages_as_a_non_root_user() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?$", text, re.M)
    assert [stage for _, stage in stages] == ["build", "runtime"]
    assert "COPY --from=build /opt/search2o /opt/search2o" in text
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users == ["search2o"]
    assert "--uid 10001" in text
    # The README's steps: PyTorch's CPU build of the same version, then search2o.
    torch = re.search(r"torch==[\d.]+", (ROOT / "README.md").read_text())
    assert torch is not None and f'--index-url "${{TORCH_INDEX_URL}}" {torch.group(0)}' in text
    assert 'pip install ".[postgres,otel]"' in text
    assert "pgvector" in (ROOT / "pyproject.toml").read_text()
    check = re.search(r"^HEALTHCHECK .*\n\s+CMD (.+)$", text, re.M)
    assert check is not None and "/v1/health'" in check.group(1)


def test_the_probes_the_files_name_are_routes_of_the_app(tmp_path: Path) -> None:
    named = set(re.findall(r"/v1/health[a-z/]*", (DEPLOY / "Dockerfile").read_text()))
    named |= set(re.findall(r"/v1/health[a-z/]*", (DEPLOY / "compose.yaml").read_text()))
    assert named == {"/v1/health", "/v1/health/ready"}
    with (
        Runtime(Settings(data_dir=tmp_path / "data")) as rt,
        serve(create_app(rt.settings, runtime=rt)) as client,
    ):
        answers = {path: client.get(path).status_code for path in sorted(named)}
    assert answers == {"/v1/health": 200, "/v1/health/ready": 200}


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_procfile_runs_two_api_processes_and_a_worker(
    tmp_path: Path, database_url: str
) -> None:
    data = tmp_path / "data"
    with Runtime(Settings(data_dir=data, database_url=database_url, auth_mode="token")) as rt:
        auth = add_user(rt, "ann@example.com", admin=True)
    env_file = tmp_path / "search2o.env"
    example = (DEPLOY / "search2o.env.example").read_text()
    example = example.replace("/var/lib/search2o", str(data))
    example = re.sub(
        r"^SEARCH2O_DATABASE_URL=.*$", f"SEARCH2O_DATABASE_URL={database_url}", example, flags=re.M
    )
    env_file.write_text(example)
    base = free_port()
    while any(_busy(port) for port in (base, base + 1, base + 100)):
        base = free_port()
    env = process_env(data, database_url)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    log = tmp_path / "honcho.log"
    with log.open("w") as out:
        honcho = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "honcho"),
                "start",
                "-f",
                str(DEPLOY / "Procfile"),
                "-e",
                str(env_file),
                "-c",
                "web=2,worker=1",
                "-p",
                str(base),
                "--no-colour",
            ],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        urls = [f"http://127.0.0.1:{base}", f"http://127.0.0.1:{base + 1}"]
        for url in urls:
            ready = wait_ready(url, within_s=120)
            assert "jobs.server_workers = 0" in ready.json()["checks"]["jobs"]["detail"]
        for n, url in enumerate(urls):
            turn = httpx.post(
                f"{url}/v1/chat",
                json={"message": f"hello {n}", "stream": False},
                headers=auth,
                timeout=60,
            )
            assert turn.status_code == 200, turn.text
        # Uploaded to the first process, ingested by the worker, searchable on the second.
        upload = httpx.post(
            f"{urls[0]}/v1/documents?wait=60",
            files=[
                (
                    "files",
                    ("bikes.md", b"# Bikes\n\nBicycles go in the basement.\n", "text/markdown"),
                )
            ],
            headers=auth,
            timeout=90,
        )
        assert upload.status_code == 201, upload.text
        hits = httpx.post(
            f"{urls[1]}/v1/search",
            json={"query": "where do bicycles go?"},
            headers=auth,
            timeout=60,
        ).json()["hits"]
        assert hits and hits[0]["source"].endswith("bikes.md")
        honcho.send_signal(signal.SIGTERM)
        honcho.wait(timeout=90)
    finally:
        if honcho.poll() is None:
            honcho.kill()
    output = log.read_text()
    assert output.count("search2o stopped") == 2, output[-4000:]
    assert "worker stopped" in output, output[-4000:]
    time.sleep(0.2)
    assert not any(_busy(port) for port in (base, base + 1))


def _busy(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
    except httpx.TransportError:
        return False
    return True
