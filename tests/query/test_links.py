"""``safe_link``: which addresses may be a citation's link target (WHATWG URL scheme rules)."""

from __future__ import annotations

import pytest

from search2o.query.citations import safe_link


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        " JaVaScRiPt:alert(document.cookie)",
        "java\tscript:alert(1)",
        "java\nscript:alert(1)",
        "java\rscript:alert(1)",
        "\x01javascript:alert(1)",
        "\x00 \x1fjavascript:alert(1)",
        "javascript\t:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "DATA:text/html;base64,PHNjcmlwdD4=",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "ftp://example.org/x",
        "//evil.example/x",
        "/relative/path",
        "example.org/no-scheme",
        "http://",
        "https:///no-host",
        "http:evil.example",
        "https:\\\\evil.example",
        "https://good.example\\@evil.example",
        "http://[::1",
        "https://example.org:99999/",
        "https://exa mple.org/",
        "https://example.org/\x7f",
        "https://example.org/\x85",
        "https://example.org/" + "a" * 8000,
        "",
        "   ",
    ],
)
def test_safe_link_refuses_anything_but_a_plain_http_or_https_url(url: str) -> None:
    assert safe_link(url) is None


@pytest.mark.parametrize(
    ("url", "link"),
    [
        ("https://example.org/a?b=c#d", "https://example.org/a?b=c#d"),
        ("HTTP://EXAMPLE.ORG/Path", "HTTP://EXAMPLE.ORG/Path"),
        ("  https://example.org/x  ", "https://example.org/x"),
        ("\x01https://example.org/x\x1f", "https://example.org/x"),
        ("https://exa\tmple.org/x\n", "https://example.org/x"),
        ("https://user@example.org:8443/", "https://user@example.org:8443/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("https://b\u00fccher.example/%20x", "https://b\u00fccher.example/%20x"),
    ],
)
def test_safe_link_keeps_http_and_https_as_a_browser_would_read_them(url: str, link: str) -> None:
    assert safe_link(url) == link


def test_safe_link_of_a_non_string_is_none() -> None:
    assert safe_link(None) is None
