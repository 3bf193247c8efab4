"""``search2o users link-code`` and ``search2o surfaces ...`` on both backends."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from search2o import accounts
from search2o.accounts import SurfaceCaller
from search2o.errors import InputError
from search2o.surfaces import identity
from tests.conftest import free_port
from tests.test_cli import Cli, error_line, out

pytestmark = pytest.mark.slow

CODE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{3}$")


def test_a_link_code_from_the_cli_links_an_account_once(cli: Cli) -> None:
    cli.ok("users", "add", "ann@example.com")
    lines = out(cli.ok("users", "link-code", "Ann@Example.com", "--surface", "slack")).splitlines()
    assert lines[0].startswith("link code of ann@example.com on slack, valid until ")
    assert lines[0].endswith(" UTC (shown once):")
    code = lines[-1]
    assert CODE.match(code), code
    db = cli.database()
    try:
        with db.session() as session:
            assert identity.link(session, "slack", "T1", "U1", code).email == "ann@example.com"
        with db.session() as session, pytest.raises(InputError):
            identity.link(session, "slack", "T1", "U2", code)
    finally:
        db.close()
    listed = json.loads(cli.ok("surfaces", "identities", "--json").stdout)
    assert [
        (i["surface"], i["workspace"], i["external_user_id"], i["email"], i["linked_by"])
        for i in listed
    ] == [("slack", "T1", "U1", "ann@example.com", "code")]
    assert "ann@example.com" in out(cli.ok("surfaces", "identities", "--surface", "slack"))
    assert (
        json.loads(cli.ok("surfaces", "identities", "--surface", "telegram", "--json").stdout) == []
    )
    gone = out(cli.ok("surfaces", "unlink", "slack", "T1", "U1")).strip()
    assert gone == "unlinked slack account T1:U1 from ann@example.com"
    assert "not linked" in error_line(cli("surfaces", "unlink", "slack", "T1", "U1"), 1)


def test_bad_link_code_requests_exit_2_with_one_line(cli: Cli) -> None:
    cli.ok("users", "add", "ann@example.com")
    assert "--minutes" in error_line(
        cli("users", "link-code", "ann@example.com", "--minutes", "0"), 2
    )
    assert "--minutes" in error_line(
        cli("users", "link-code", "ann@example.com", "--minutes", "1441"), 2
    )
    assert error_line(
        cli("users", "link-code", "ann@example.com", "--surface", "Slack"), 2
    ).startswith("error: surface: ")
    assert error_line(cli("users", "link-code", "nobody"), 2).startswith("error: email: ")
    assert "no user ghost@example.com" in error_line(
        cli("users", "link-code", "ghost@example.com"), 1
    )
    assert error_line(cli("surfaces", "unlink", "slack", "T:1", "U1"), 2).startswith(
        "error: workspace: "
    )
    db = cli.database()
    try:
        with db.session() as session:
            assert identity.list_identities(session) == []
    finally:
        db.close()


def test_a_surface_token_is_listed_as_the_surfaces_and_revoked_like_any(cli: Cli) -> None:
    token = out(cli.ok("surfaces", "token", "slack", "--name", "workspace bot")).strip()
    assert token.startswith("s2o_")
    db = cli.database()
    try:
        with db.session() as session:
            assert accounts.resolve_token(session, token) == SurfaceCaller("slack")
    finally:
        db.close()
    listed = json.loads(cli.ok("tokens", "list", "--json").stdout)
    assert [(t["email"], t["name"], t["surface"]) for t in listed] == [
        ("", "workspace bot", "slack")
    ]
    assert "surface slack" in out(cli.ok("tokens", "list"))
    revoked = out(cli.ok("tokens", "revoke", token[:12])).strip()
    assert revoked == f"revoked {token[:12]} of the slack surface"
    assert error_line(cli("surfaces", "token", "Slack"), 2).startswith("error: surface: ")
    assert len(json.loads(cli.ok("tokens", "list", "--json").stdout)) == 1


@pytest.mark.parametrize(
    ("surface", "env", "line"),
    [
        (
            "slack",
            {"BOT_TOKEN": "xoxb-test", "SIGNING_SECRET": "s", "MODE": "http", "API_URL": "{url}"},
            "cannot reach {url}/: connection refused",
        ),
        (
            "telegram",
            {"BOT_TOKEN": "7000001:secret", "MODE": "polling", "API_URL": "{url}"},
            "telegram: cannot reach {url}/: connection refused",
        ),
        (
            "mattermost",
            {"BOT_TOKEN": "secret-token", "URL": "{url}"},
            "mattermost: cannot reach {url}: connection refused",
        ),
    ],
)
def test_check_says_in_one_line_when_the_messenger_cannot_be_reached(
    tmp_path: Path, surface: str, env: dict[str, str], line: str
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    cli = Cli(tmp_path / "data", f"sqlite:///{tmp_path / 'db.sqlite'}")
    prefix = f"SEARCH2O_{surface.upper()}__"
    cli.env.update({prefix + k: v.format(url=url) for k, v in env.items()})
    result = cli(surface, "check")
    assert result.exit_code == 1
    assert out(result).splitlines()[0] == line.format(url=url)
    assert "secret" not in out(result)  # the token never shows
