"""Web search providers for the ``web_search`` tool (off unless an admin configures one).

A provider is a factory in the ``search2o.web_search`` entry point group:
``(settings: WebSearchSettings) -> WebSearchProvider``. The built-in ``searxng`` provider calls a
self-hosted SearXNG instance's JSON API (docs.searxng.org, "Search API":
``GET /search?q=...&format=json`` answering ``{"results": [{"title", "url", "content"}]}``).
Nothing connects at start; the first call does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import httpx

from search2o.errors import ConfigError, ProviderError
from search2o.plugins import check_members, load_factory
from search2o.query.settings import WebSearchSettings

__all__ = ["SearxngProvider", "WebResult", "WebSearchProvider", "build_web_search"]


@dataclass(frozen=True)
class WebResult:
    """One web page: title, address and the engine's snippet, as the engine sent them.

    ``url`` is untrusted text, not yet a link: the ``web_search`` tool passes it through
    :func:`~search2o.query.citations.safe_link` before it becomes a citation's link target.
    """

    title: str
    url: str
    snippet: str


class WebSearchProvider(Protocol):
    """Searches the web.

    ``search(query, k)`` returns at most ``k`` results, best first.
    Errors are :class:`~search2o.errors.ProviderError`.
    """

    def search(self, query: str, k: int) -> list[WebResult]:
        """Return up to ``k`` results for ``query``."""
        ...


class SearxngProvider:
    """A SearXNG instance's JSON API (the instance must enable the ``json`` format).

    Raises:
        ConfigError: ``web_search.base_url`` is not set.

    """

    def __init__(self, settings: WebSearchSettings) -> None:
        if not settings.base_url:
            raise ConfigError(
                "setting chat.web_search.base_url: required for the searxng provider "
                "(e.g. http://searxng.internal:8080)"
            )
        self._url = settings.base_url.rstrip("/") + "/search"
        self._timeout = settings.timeout_s

    def search(self, query: str, k: int) -> list[WebResult]:
        """Query ``/search?format=json``; see :class:`WebSearchProvider`.

        Raises:
            ProviderError: the instance is unreachable, answered an error status, or sent a
                body without a ``results`` list.

        """
        try:
            response = httpx.get(
                self._url, params={"q": query, "format": "json"}, timeout=self._timeout
            )
            response.raise_for_status()
            results = response.json()["results"]
            return [
                WebResult(
                    title=str(r.get("title") or r.get("url", "")),
                    url=str(r["url"]),
                    snippet=str(r.get("content") or ""),
                )
                for r in results[:k]
            ]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ProviderError(f"web search at {self._url} failed: {exc}") from exc


def build_web_search(settings: WebSearchSettings) -> WebSearchProvider | None:
    """Build the configured provider, or ``None`` when web search is off (the default).

    Raises:
        ConfigError: the provider name is unknown or its settings are incomplete.

    """
    if settings.provider is None:
        return None
    factory = load_factory("search2o.web_search", settings.provider, "chat.web_search.provider")
    provider: WebSearchProvider = factory(settings)
    check_members(provider, ("search",), f"web search provider {settings.provider!r}")
    return provider
