"""The API document's patterns and the engines' checks agree (search2o.wire.fields).

Every value a documented pattern allows is accepted by the engine's own check, so a client that
follows the OpenAPI document is never refused; values outside the pattern that the engine
refuses too are refused by both, naming the field.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search2o.accounts import normalize_email, normalize_groups
from search2o.api.uploads import MAX_NAME_CHARS, check_name
from search2o.errors import InputError
from search2o.memory.changes import check_agent, check_label
from search2o.wire.fields import EMAIL_PATTERN, GROUP_PATTERN, NAME_PATTERN, PATH_PATTERN

_FAST = settings(max_examples=300, deadline=None)


@_FAST
@given(st.from_regex(EMAIL_PATTERN, fullmatch=True).filter(lambda v: len(v) <= 320))
def test_every_documented_email_is_accepted(email: str) -> None:
    normalized = normalize_email(email)
    assert len(normalized) == len(email)
    assert normalized.count("@") == 1


@_FAST
@given(st.from_regex(GROUP_PATTERN, fullmatch=True))
def test_every_documented_group_is_accepted(group: str) -> None:
    assert normalize_groups([group]) == [group]


@_FAST
@given(st.from_regex(NAME_PATTERN, fullmatch=True).filter(lambda v: len(v) <= 64))
def test_every_documented_agent_name_and_label_is_accepted(name: str) -> None:
    assert check_agent(name, "agent") == name
    assert check_label(name, "label") == name


@_FAST
@given(st.from_regex(PATH_PATTERN, fullmatch=True).filter(lambda v: len(v) <= MAX_NAME_CHARS))
def test_every_documented_upload_path_is_accepted(path: str) -> None:
    assert check_name(path, "paths[0]") == path.strip()


@pytest.mark.parametrize("path", ["", "   ", "\u3000", "a\x00b", "tab\there", "c1\x85c1"])
def test_an_upload_path_outside_the_pattern_is_refused_by_both(path: str) -> None:
    assert not re.fullmatch(PATH_PATTERN, path)
    with pytest.raises(InputError) as caught:
        check_name(path, "paths[0]")
    assert caught.value.field == "paths[0]"


@pytest.mark.parametrize(
    "email",
    ["no-at-sign", "two@@example.com", "a b@example.com", "a@exa\u00a0mple.com", "a\x00@b.c", "@b"],
)
def test_an_email_outside_the_pattern_is_refused_by_both(email: str) -> None:
    assert not re.fullmatch(EMAIL_PATTERN, email)
    with pytest.raises(InputError) as caught:
        normalize_email(email, "email")
    assert caught.value.field == "email"


@pytest.mark.parametrize("group", ["", "-lead", "with space", "a/b", "x" * 101, "nul\x00"])
def test_a_group_outside_the_pattern_is_refused_by_both(group: str) -> None:
    assert not re.fullmatch(GROUP_PATTERN, group)
    with pytest.raises(InputError) as caught:
        normalize_groups([group], "groups")
    assert caught.value.field == "groups"


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "a b", "a/b", "a\x00b", "semi;colon"])
def test_a_name_outside_the_pattern_is_refused_by_both(name: str) -> None:
    assert not re.fullmatch(NAME_PATTERN, name)
    with pytest.raises(InputError) as caught:
        check_agent(name, "agent")
    assert caught.value.field == "agent"


def test_an_email_is_lower_cased_without_changing_its_length() -> None:
    assert normalize_email("  Ada@Example.COM ") == "ada@example.com"
    # U+0130 lower-cases to two characters; it is kept, so the length holds.
    assert normalize_email("\u0130@example.com") == "\u0130@example.com"


@pytest.mark.parametrize(("sent", "read"), [(76, 76), (76.0, 76), (3.0, 3), (1e3, 1000)])
def test_an_integer_is_read_as_json_schema_reads_it(sent: object, read: int) -> None:
    from search2o.wire.schemas import SearchRequest

    assert SearchRequest.model_validate({"query": "x", "k": sent}).k == read


@pytest.mark.parametrize("sent", ["76", True, 76.5, None, [76]])
def test_what_json_schema_calls_no_integer_is_refused(sent: object) -> None:
    from pydantic import ValidationError

    from search2o.wire.schemas import SearchRequest

    with pytest.raises(ValidationError) as refused:
        SearchRequest.model_validate({"query": "x", "k": sent})
    assert refused.value.errors()[0]["loc"] == ("k",)
