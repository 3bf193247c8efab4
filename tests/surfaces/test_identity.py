"""Surface identities on both backends: names, link codes, email links, acting, shared channels."""

from __future__ import annotations

import hashlib
import re
import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text, update

from search2o import accounts
from search2o.errors import InputError, NotFoundError, PermissionDeniedError
from search2o.storage.db import Database
from search2o.storage.models import User, utcnow
from search2o.storage.surface_models import LinkCode, SharedPrincipal, SurfaceIdentity
from search2o.surfaces import identity
from search2o.surfaces.identity import CODE_ALPHABET, canonical_code, new_code
from search2o.wire.names import check_external_id, check_surface, check_workspace

CODE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{3}$")
BAD_CODE = (
    "is unknown, used or expired, or meant for another surface; get a new one in the Web App "
    "or with `search2o users link-code EMAIL`"
)


def add(database: Database, email: str, **kwargs: Any) -> int:
    with database.session() as session:
        return accounts.create_user(session, email, **kwargs).id


def mint(database: Database, user_id: int, **kwargs: Any) -> str:
    with database.session() as session:
        return identity.issue_link_code(session, user_id, **kwargs).code


def redeem(database: Database, code: str, surface: str = "slack", who: str = "U1") -> Any:
    with database.session() as session:
        return identity.link(session, surface, "T1", who, code)


def rows(database: Database, table: Any) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count()).select_from(table)) or 0)


def refused(call: Any) -> InputError:
    with pytest.raises(InputError) as info:
        call()
    return info.value


# --- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "value", "words"),
    [
        (check_surface, "Slack", "lower-case surface name"),
        (check_surface, "", "must not be empty"),
        (check_surface, "s" * 33, "limit is 32"),
        (check_surface, "sl ack", "lower-case"),
        (check_workspace, "T1:x", "letters, digits"),
        (check_workspace, " T1", "letters, digits"),
        (check_workspace, "T\x001", "NUL"),
        (check_workspace, "T\ud8001", "lone surrogate"),
        (check_workspace, "T/1", "letters, digits"),
        (check_workspace, "T\x1b[2J", "letters, digits"),
        (check_workspace, 7, "must be a string"),
    ],
)
def test_a_bad_name_names_the_field_and_the_rule(check: Any, value: Any, words: str) -> None:
    exc = refused(lambda: check(value, "where"))
    assert exc.field == "where"
    assert words in exc.reason


def test_platform_ids_are_names() -> None:
    assert check_surface("mattermost") == "mattermost"
    assert check_workspace("-1001234567890") == "-1001234567890"  # a Telegram group
    assert check_external_id("1700000000.123456", "thread") == "1700000000.123456"
    assert check_external_id("@ann:matrix.org", "external_user_id") == "@ann:matrix.org"
    assert refused(lambda: check_external_id("a" * 201, "thread")).field == "thread"


# --- link codes ------------------------------------------------------------------------------


def test_a_code_is_typeable_forgiving_and_catches_every_single_typo() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200 and all(CODE.match(c) for c in codes)
    code = next(iter(codes))
    canonical = canonical_code(code)
    assert canonical == code.replace("-", "")
    assert canonical_code(f"  {code.lower()} ") == canonical
    assert canonical_code(code.replace("-", " ")) == canonical
    # Crockford's reading of look-alikes: O is 0, I and L are 1
    sample = "0" + canonical[1:]
    fixed = sample[:-1] + identity._check_character(sample[:-1])
    assert canonical_code("o" + fixed[1:]) == fixed
    for position in range(len(canonical)):
        for symbol in CODE_ALPHABET:
            if symbol == canonical[position]:
                continue
            typo = canonical[:position] + symbol + canonical[position + 1 :]
            assert "typo" in refused(lambda t=typo: canonical_code(t)).reason, typo  # type: ignore[misc]
    for bad in ("", "ABCD", canonical + "0", canonical[:-1] + "U", "x" * 65, None):
        assert refused(lambda b=bad: canonical_code(b)).field == "code"  # type: ignore[misc]


def test_only_the_hash_of_a_code_is_stored(database: Database) -> None:
    ann = add(database, "ann@example.com")
    code = mint(database, ann)
    with database.engine.connect() as conn:
        stored = conn.execute(text("SELECT * FROM link_codes")).mappings().all()
    assert len(stored) == 1
    assert stored[0]["code_hash"] == hashlib.sha256(canonical_code(code).encode()).hexdigest()
    for value in stored[0].values():
        assert canonical_code(code) not in str(value) and code not in str(value)


def test_a_code_links_once_then_answers_like_an_unknown_expired_or_foreign_one(
    database: Database,
) -> None:
    ann = add(database, "ann@example.com")
    bob = add(database, "bob@example.com")
    code = mint(database, ann)
    linked = redeem(database, code.lower())
    assert (linked.surface, linked.workspace, linked.external_user_id) == ("slack", "T1", "U1")
    assert (linked.user_id, linked.email, linked.linked_by) == (ann, "ann@example.com", "code")

    reasons = []
    reasons.append(refused(lambda: redeem(database, code, who="U2")).reason)  # used
    data = "ABCDEFGHJK"
    unknown = data + identity._check_character(data)
    reasons.append(refused(lambda: redeem(database, unknown)).reason)
    expired = mint(database, bob)
    with database.session() as session:
        session.execute(update(LinkCode).values(expires_at=utcnow() - timedelta(seconds=1)))
    reasons.append(refused(lambda: redeem(database, expired, who="U3")).reason)
    telegram_only = mint(database, bob, surface="telegram")
    reasons.append(refused(lambda: redeem(database, telegram_only, who="U4")).reason)
    assert reasons == [BAD_CODE] * 4
    with database.session() as session:
        assert identity.find_identity(session, "slack", "T1", "U2") is None
        assert identity.find_identity(session, "slack", "T1", "U4") is None
    # a code of another surface is not used up by the refusal
    assert redeem(database, telegram_only, surface="telegram", who="U4").user_id == bob
    assert rows(database, SurfaceIdentity) == 2


def test_two_redemptions_of_one_code_at_once_link_one_account(database: Database) -> None:
    ann = add(database, "ann@example.com")
    code = mint(database, ann)
    start = threading.Barrier(4)
    outcomes: list[str] = []

    def attempt(who: str) -> None:
        start.wait()
        try:
            redeem(database, code, who=who)
            outcomes.append("linked")
        except InputError as exc:
            outcomes.append(exc.reason)

    workers = [threading.Thread(target=attempt, args=(f"U{i}",)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(outcomes) == sorted(["linked"] + [BAD_CODE] * 3)
    assert rows(database, SurfaceIdentity) == 1


def test_minting_drops_the_users_earlier_unused_code_and_expired_ones(database: Database) -> None:
    ann = add(database, "ann@example.com")
    bob = add(database, "bob@example.com")
    first = mint(database, ann)
    bobs = mint(database, bob)
    with database.session() as session:  # bob's code expired meanwhile
        session.execute(
            update(LinkCode)
            .where(LinkCode.user_id == bob)
            .values(expires_at=utcnow() - timedelta(minutes=1))
        )
    second = mint(database, ann, minutes=1440)
    assert rows(database, LinkCode) == 1
    assert refused(lambda: redeem(database, first)).reason == BAD_CODE
    assert refused(lambda: redeem(database, bobs)).reason == BAD_CODE
    assert redeem(database, second).user_id == ann


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"minutes": 0}, "minutes"),
        ({"minutes": 1441}, "minutes"),
        ({"minutes": True}, "minutes"),
        ({"surface": "Slack"}, "surface"),
    ],
)
def test_a_bad_code_request_names_the_field_and_mints_nothing(
    database: Database, kwargs: dict[str, Any], field: str
) -> None:
    ann = add(database, "ann@example.com")
    mint(database, ann)
    assert refused(lambda: mint(database, ann, **kwargs)).field == field
    assert rows(database, LinkCode) == 1  # the earlier code was not dropped either


def test_a_code_corrects_a_link_and_an_email_never_overrides_one(database: Database) -> None:
    ann = add(database, "ann@example.com")
    bob = add(database, "bob@example.com")
    with database.session() as session:
        first = identity.link_by_email(session, "slack", "T1", "U1", "ANN@example.com")
    assert first is not None and (first.user_id, first.linked_by) == (ann, "email")
    with database.session() as session:  # the platform's email changed: the link stays
        kept = identity.link_by_email(session, "slack", "T1", "U1", "bob@example.com")
    assert kept == first
    relinked = redeem(database, mint(database, bob))
    assert (relinked.user_id, relinked.linked_by) == (bob, "code")
    assert rows(database, SurfaceIdentity) == 1


def test_an_unknown_email_links_nothing(database: Database) -> None:
    add(database, "ann@example.com")
    with database.session() as session:
        assert identity.link_by_email(session, "slack", "T1", "U1", "nobody@example.com") is None
        assert (
            refused(
                lambda: identity.link_by_email(session, "slack", "T1", "U1", "not an email")
            ).field
            == "email"
        )
        assert (
            refused(
                lambda: identity.link_by_email(session, "slack", "T:1", "U1", "ann@example.com")
            ).field
            == "workspace"
        )
    assert rows(database, SurfaceIdentity) == 0


def test_unlink_and_list(database: Database) -> None:
    ann = add(database, "ann@example.com")
    redeem(database, mint(database, ann))
    redeem(database, mint(database, ann), surface="telegram", who="42")
    with database.session() as session:
        listed = [(i.surface, i.external_user_id) for i in identity.list_identities(session)]
        assert listed == [("slack", "U1"), ("telegram", "42")]
        assert len(identity.list_identities(session, "telegram")) == 1
        gone = identity.unlink(session, "slack", "T1", "U1")
        assert gone.email == "ann@example.com"
        with pytest.raises(NotFoundError):
            identity.unlink(session, "slack", "T1", "U1")
    assert rows(database, SurfaceIdentity) == 1


def test_a_users_links_and_codes_go_with_the_user(database: Database) -> None:
    ann = add(database, "ann@example.com")
    redeem(database, mint(database, ann))
    mint(database, ann)
    with database.session() as session:
        session.delete(session.get(User, ann))
    assert (rows(database, SurfaceIdentity), rows(database, LinkCode)) == (0, 0)


# --- acting ----------------------------------------------------------------------------------


def test_a_surface_acts_for_an_account_linked_on_it_and_never_as_an_admin(
    database: Database,
) -> None:
    boss = add(database, "boss@example.com", is_admin=True, groups=["hr"], plan="paid")
    redeem(database, mint(database, boss))
    with database.session() as session:
        principal = identity.acting_principal(session, "slack", "user:T1:U1")
    assert principal.user_id == boss and principal.groups == ("hr",) and principal.plan == "paid"
    assert principal.is_admin is False and principal.surface == "slack"
    assert principal.access_keys() == ["user:boss@example.com", "group:hr"]

    with database.session() as session:
        with pytest.raises(PermissionDeniedError) as elsewhere:
            identity.acting_principal(session, "telegram", "user:T1:U1")
        with pytest.raises(PermissionDeniedError) as nowhere:
            identity.acting_principal(session, "telegram", "user:T1:U9")
    assert "not linked to a user on telegram" in elsewhere.value.message
    assert elsewhere.value.message.replace("U1", "U9") == nowhere.value.message


@pytest.mark.parametrize(
    "header",
    [
        "",
        "user",
        "user:T1",
        "user:T1:",
        "user::U1",
        "admin:T1",
        "shared:",
        "shared:T 1",
        "user:T1:U1\x00",
        "user:T1:U/1",
    ],
)
def test_a_malformed_act_as_header_is_refused_naming_it(database: Database, header: str) -> None:
    with database.session() as session:
        exc = refused(lambda: identity.acting_principal(session, "slack", header))
    assert exc.field == "X-Search2o-Act-As"
    assert rows(database, User) == 0  # not even a shared principal was made


def test_the_shared_principal_reads_only_open_documents_and_owns_its_own_rows(
    database: Database,
) -> None:
    with database.session() as session:
        first = identity.acting_principal(session, "slack", "shared:T1")
        again = identity.shared_principal(session, "slack", "T1")
        other_workspace = identity.shared_principal(session, "slack", "T2")
        other_surface = identity.shared_principal(session, "telegram", "T1")
    assert first == again
    assert len({first.user_id, other_workspace.user_id, other_surface.user_id}) == 3
    assert first.shared and first.surface == "slack" and not first.is_admin
    assert first.groups == () and first.access_keys() == []
    assert first.email.endswith("@slack.surfaces.invalid")
    assert rows(database, SharedPrincipal) == 3
    # it links no account, by email or by code
    with database.session() as session:
        assert identity.link_by_email(session, "slack", "T1", "U1", first.email) is None
        assert refused(lambda: identity.issue_link_code(session, first.user_id)).field == "email"


def test_two_first_requests_of_a_shared_principal_get_the_same_one(database: Database) -> None:
    start = threading.Barrier(4)
    seen: list[int] = []

    def act() -> None:
        start.wait()
        with database.session() as session:
            seen.append(identity.shared_principal(session, "slack", "T1").user_id)

    workers = [threading.Thread(target=act) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len(seen) == 4 and len(set(seen)) == 1
    assert rows(database, User) == 1  # the losers' rows were removed
