"""Users and API tokens on both backends: validation, hashing, authentication, revocation."""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select

from search2o import accounts
from search2o.accounts import Principal
from search2o.errors import AuthenticationError, ConflictError, InputError, NotFoundError
from search2o.storage.db import Database
from search2o.storage.models import ApiToken, User


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes (stored as UTC); PostgreSQL aware ones."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _user_count(database: Database) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count()).select_from(User)) or 0)


def _token_count(database: Database) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count()).select_from(ApiToken)) or 0)


def test_create_user_normalises_email_groups_and_defaults(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(
            session, "  Ann.Lee@Example.COM ", groups=[" hr ", "hr", "eng"], plan="paid"
        )
        user_id = user.id
    with database.session() as session:
        stored = session.get(User, user_id)
        assert stored is not None
        assert stored.email == "ann.lee@example.com"
        assert stored.display_name == "ann.lee"
        assert stored.groups == ["hr", "eng"]
        assert stored.plan == "paid"
        assert stored.is_admin is False
        principal = Principal.of(stored)
    assert principal == Principal(user_id, "ann.lee@example.com", ("hr", "eng"), False, "paid")
    assert principal.access_keys() == ["user:ann.lee@example.com", "group:hr", "group:eng"]


def test_create_user_keeps_a_given_display_name_and_admin_flag(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(
            session, "boss@example.com", display_name="The Boss", is_admin=True
        )
        assert (user.display_name, user.is_admin, user.plan, user.groups) == (
            "The Boss",
            True,
            "free",
            [],
        )


@pytest.mark.parametrize(
    ("email", "extra", "field"),
    [
        ("not-an-email", {}, "email"),
        ("two@at@example.com", {}, "email"),
        ("space in@example.com", {}, "email"),
        ("   ", {}, "email"),
        ("x" * 320 + "@example.com", {}, "email"),
        ("ok@example.com", {"plan": "gold"}, "plan"),
        ("ok@example.com", {"groups": ["h r"]}, "group"),
        ("ok@example.com", {"groups": [""]}, "group"),
        ("ok@example.com", {"groups": ["-leading-dash"]}, "group"),
        ("ok@example.com", {"groups": ["g" * 101]}, "group"),
    ],
)
def test_create_user_rejects_bad_values_naming_the_field(
    database: Database, email: str, extra: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError) as caught, database.session() as session:
        accounts.create_user(session, email, **extra)
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field}: ")
    assert _user_count(database) == 0


def test_group_names_at_the_limits_are_accepted(database: Database) -> None:
    assert accounts.normalize_groups(["a", "g" * 100, "A1._-z"]) == ["a", "g" * 100, "A1._-z"]
    with database.session() as session:
        user = accounts.create_user(session, "limits@example.com", groups=["g" * 100])
        assert user.groups == ["g" * 100]


def test_duplicate_email_is_a_conflict_whatever_the_case(database: Database) -> None:
    with database.session() as session:
        accounts.create_user(session, "dup@example.com")
    with pytest.raises(ConflictError, match=r"dup@example\.com"), database.session() as session:
        accounts.create_user(session, "DUP@example.com ")
    assert _user_count(database) == 1


def test_get_ensure_and_list_users(database: Database) -> None:
    with database.session() as session:
        with pytest.raises(NotFoundError, match="users add"):
            accounts.get_user(session, "ghost@example.com")
        with pytest.raises(InputError) as caught:
            accounts.get_user(session, "ghost")
        assert caught.value.field == "email"
        first = accounts.ensure_user(session, "Local@Localhost", is_admin=True)
        again = accounts.ensure_user(session, "local@localhost")
        assert first.id == again.id and again.is_admin
        accounts.create_user(session, "b@example.com")
        accounts.create_user(session, "a@example.com")
    with database.session() as session:
        assert accounts.get_user(session, " A@EXAMPLE.com").email == "a@example.com"
        assert [u.email for u in accounts.list_users(session)] == [
            "a@example.com",
            "b@example.com",
            "local@localhost",
        ]


def test_issued_token_is_stored_only_as_its_hash(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(session, "tok@example.com")
        secret = accounts.issue_token(session, user, "laptop")
    assert secret.startswith("s2o_") and len(secret) > 40
    with database.session() as session:
        row = session.scalars(select(ApiToken)).one()
        stored = [row.name, row.prefix, row.token_hash]
    assert stored == ["laptop", secret[:12], hashlib.sha256(secret.encode()).hexdigest()]
    assert all(secret not in value for value in stored)


def test_tokens_are_distinct_and_long_names_are_cut(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(session, "many@example.com")
        secrets_ = {accounts.issue_token(session, user, "n" * 300) for _ in range(5)}
    assert len(secrets_) == 5
    with database.session() as session:
        assert {len(t.name) for t in accounts.list_tokens(session)} == {100}


def test_authenticate_returns_the_owner_and_notes_the_use(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(session, "Use@Example.com", groups=["ops"], is_admin=True)
        secret = accounts.issue_token(session, user)
        user_id = user.id
    with database.session() as session:
        assert accounts.list_tokens(session)[0].last_used_at is None
    before = datetime.now(UTC)
    with database.session() as session:
        principal = accounts.authenticate(session, f"  {secret}\n")
    assert principal == Principal(user_id, "use@example.com", ("ops",), True, "free")
    with database.session() as session:
        used = accounts.list_tokens(session)[0].last_used_at
    assert used is not None
    assert _aware(used) >= before.replace(microsecond=0)


@pytest.mark.parametrize("secret", ["", "s2o_", "s2o_not-a-real-token", "Bearer x"])
def test_unknown_tokens_do_not_authenticate(database: Database, secret: str) -> None:
    with database.session() as session:
        accounts.issue_token(session, accounts.create_user(session, "real@example.com"))
    with pytest.raises(AuthenticationError), database.session() as session:
        accounts.authenticate(session, secret)


def test_revoke_by_prefix(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(session, "rev@example.com")
        secret = accounts.issue_token(session, user, "ci")
        other = accounts.issue_token(session, user, "laptop")
    with database.session() as session:
        info = accounts.revoke_token(session, f" {secret[:12]} ")
    assert (info.prefix, info.email, info.name, info.revoked) == (
        secret[:12],
        "rev@example.com",
        "ci",
        True,
    )
    with pytest.raises(AuthenticationError), database.session() as session:
        accounts.authenticate(session, secret)
    with database.session() as session:  # the user's other token still works
        assert accounts.authenticate(session, other).email == "rev@example.com"
        states = {t.prefix: t.revoked for t in accounts.list_tokens(session)}
    assert states == {secret[:12]: True, other[:12]: False}
    with pytest.raises(NotFoundError, match="tokens list"), database.session() as session:
        accounts.revoke_token(session, secret[:12])


def test_revoke_by_full_token(database: Database) -> None:
    with database.session() as session:
        secret = accounts.issue_token(session, accounts.create_user(session, "full@example.com"))
    with database.session() as session:
        assert accounts.revoke_token(session, secret).revoked
    with pytest.raises(AuthenticationError), database.session() as session:
        accounts.authenticate(session, secret)
    with pytest.raises(NotFoundError), database.session() as session:
        accounts.revoke_token(session, secret)


def test_revoke_unknown_token_or_prefix_is_not_found(database: Database) -> None:
    with database.session() as session:
        secret = accounts.issue_token(session, accounts.create_user(session, "x@example.com"))
    for value in ("s2o_zzzzzzzz", "s2o_" + "z" * 43, "", secret[:8]):
        with pytest.raises(NotFoundError), database.session() as session:
            accounts.revoke_token(session, value)
    with database.session() as session:
        assert accounts.authenticate(session, secret).email == "x@example.com"


def test_ambiguous_prefix_asks_for_the_whole_token(database: Database) -> None:
    with database.session() as session:
        user = accounts.create_user(session, "twin@example.com")
        secret = accounts.issue_token(session, user)
        # a second active token sharing the 12-character prefix
        session.add(ApiToken(user_id=user.id, prefix=secret[:12], token_hash="0" * 64))
    with pytest.raises(InputError) as caught, database.session() as session:
        accounts.revoke_token(session, secret[:12])
    assert caught.value.field == "token"
    with database.session() as session:
        assert not any(t.revoked for t in accounts.list_tokens(session))
        assert accounts.revoke_token(session, secret).revoked
    with pytest.raises(AuthenticationError), database.session() as session:
        accounts.authenticate(session, secret)


def test_list_tokens_never_shows_the_secret(database: Database) -> None:
    with database.session() as session:
        ann = accounts.create_user(session, "ann@example.com")
        bob = accounts.create_user(session, "bob@example.com")
        first = accounts.issue_token(session, ann, "one")
        second = accounts.issue_token(session, bob, "two")
    with database.session() as session:
        tokens = accounts.list_tokens(session)
    assert [(t.email, t.name, t.prefix) for t in tokens] == [
        ("bob@example.com", "two", second[:12]),
        ("ann@example.com", "one", first[:12]),
    ]
    for token in tokens:
        assert first not in repr(token) and second not in repr(token)
        assert not hasattr(token, "token_hash")
        assert all(len(str(v)) < 40 for v in (token.prefix, token.name))
    assert _token_count(database) == 2


def test_ensure_user_tolerates_a_concurrent_creation(database: Database) -> None:
    outcome: dict[str, object] = {}

    def second() -> None:
        try:
            with database.session() as session:
                outcome["email"] = accounts.ensure_user(session, "local@localhost").email
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=second)
    with database.session() as first:
        accounts.create_user(first, "local@localhost", is_admin=True)  # written, not committed
        thread.start()
        time.sleep(1.0)  # the second transaction found no user and waits to insert it
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert outcome == {"email": "local@localhost"}


# ---------------------------------------------------------------------------------------------
# token scope: a token printed by a local-mode start never opens a token-mode server
# ---------------------------------------------------------------------------------------------


def test_a_local_mode_token_authenticates_in_local_mode_only(database: Database) -> None:
    with database.session() as session:
        local = accounts.local_mode_token(session, "local@localhost")
        user = accounts.create_user(session, "ann@example.com")
        ordinary = accounts.issue_token(session, user, "laptop")
    with database.session() as session:
        assert accounts.authenticate(session, local, auth_mode="local").is_admin
        assert accounts.authenticate(session, ordinary, auth_mode="local").email == user.email
        assert accounts.authenticate(session, ordinary, auth_mode="token").email == user.email
    for mode in ("token", None):
        with pytest.raises(AuthenticationError), database.session() as session:
            if mode is None:
                accounts.authenticate(session, local)  # the safe default is token mode
            else:
                accounts.authenticate(session, local, auth_mode=mode)
    with database.session() as session:
        scopes = {t.prefix: t.local_only for t in accounts.list_tokens(session)}
    assert scopes == {local[:12]: True, ordinary[:12]: False}


def test_a_new_local_mode_token_replaces_the_previous_one(database: Database) -> None:
    with database.session() as session:
        first = accounts.local_mode_token(session, "local@localhost")
    with database.session() as session:
        second = accounts.local_mode_token(session, "local@localhost")
    with pytest.raises(AuthenticationError), database.session() as session:
        accounts.authenticate(session, first, auth_mode="local")
    with database.session() as session:
        assert accounts.authenticate(session, second, auth_mode="local").email == "local@localhost"
        states = [(t.revoked, t.local_only) for t in accounts.list_tokens(session)]
    assert sorted(states) == [(False, True), (True, True)]
