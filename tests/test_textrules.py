"""The one validator of outside text: NUL, lone surrogates, empty and too long texts."""

from __future__ import annotations

import pytest

from search2o.errors import InputError
from search2o.textrules import check_text, strip_nul, text_problem


def test_valid_text_is_returned_stripped() -> None:
    assert check_text("  hello\tworld \n", "message") == "hello\tworld"
    assert check_text("  x ", "message", strip=False) == "  x "
    assert text_problem("emoji 🙂 and CJK 漢字 and RTL שלום") is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "must not be empty"),
        ("   \n", "must not be empty"),
        ("a\x00b", "NUL characters (one at position 1)"),
        ("ab\ud800", "lone surrogate code point at position 2"),
        ("\udfff", "lone surrogate"),
    ],
)
def test_bad_text_names_the_field_and_the_reason(value: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        check_text(value, "query")
    assert caught.value.field == "query"
    assert reason in caught.value.reason


def test_too_long_names_the_limit_and_the_setting() -> None:
    with pytest.raises(InputError) as caught:
        check_text("x" * 11, "message", max_chars=10, setting="chat.max_message_chars")
    assert caught.value.reason == (
        "is 11 characters long; the limit is 10 (chat.max_message_chars)"
    )
    assert check_text("x" * 10, "message", max_chars=10) == "x" * 10


def test_the_length_is_counted_as_received_like_the_documents_max_length() -> None:
    # "\n" plus 10 characters is 11 as sent: over a limit of 10, though 10 once stripped.
    with pytest.raises(InputError) as caught:
        check_text("\n" + "x" * 10, "message", max_chars=10)
    assert caught.value.reason == "is 11 characters long; the limit is 10"
    assert check_text(" " + "x" * 9, "message", max_chars=10) == "x" * 9


def test_empty_may_be_allowed() -> None:
    assert check_text("", "title", allow_empty=True) == ""
    with pytest.raises(InputError):
        check_text("\x00", "title", allow_empty=True)


def test_strip_nul() -> None:
    assert strip_nul("a\x00b\x00") == "ab"
    text = "no nul"
    assert strip_nul(text) is text
