"""The Slack app this surface needs: its manifest, and a check of a running installation.

:func:`manifest` is a Slack app manifest (Slack API docs, "App manifest reference") with
exactly the bot scopes the surface uses (:data:`BOT_SCOPES`), its events, the ``/search2o``
command and interactivity; Socket Mode or request URLs by ``mode``. :func:`check` diagnoses an
installation in one line per problem: a bad or revoked token, a missing scope, Socket Mode
without an app token.
"""

from __future__ import annotations

from typing import Any

from search2o.errors import ProviderError
from search2o.surfaces.slack.settings import EXTRA, SlackSettings

__all__ = ["BOT_EVENTS", "BOT_SCOPES", "check", "manifest"]

BOT_SCOPES: dict[str, str] = {
    "app_mentions:read": "receive app_mention events",
    "channels:history": "receive follow-ups in public channel threads (message.channels); "
    "find an answer posted before a crash (conversations.replies)",
    "groups:history": "receive follow-ups in private channel threads (message.groups); "
    "find an answer posted before a crash",
    "im:history": "receive direct messages (message.im); find an answer posted before a crash",
    "mpim:history": "receive follow-ups in group DM threads (message.mpim); find an answer "
    "posted before a crash",
    "chat:write": "post, edit and stream answers",
    "reactions:write": "show the 👀 status while answering",
    "users:read": "read users with users.info",
    "users:read.email": "link accounts by their Slack email",
    "commands": "offer the /search2o command",
}
BOT_EVENTS = ("app_mention", "message.channels", "message.groups", "message.im", "message.mpim")
"""``message.mpim``: a group DM (several people and the bot) is answered as a channel is (the
shared-channel scope), on a mention and then on follow-ups in its thread. ``mpim:read`` is not
needed: the surface never lists or looks up conversations."""


def manifest(mode: str, public_url: str | None = None, name: str = "search2o") -> dict[str, Any]:
    """Return the app manifest (a JSON object Slack's "Create an app from a manifest" takes).

    Args:
        mode: ``socket`` (no request URLs) or ``http`` (needs ``public_url``).
        public_url: this server as Slack reaches it, e.g. ``https://search.example.com``.
        name: the app's and bot's display name.

    Raises:
        ValueError: ``http`` mode without ``public_url``.

    """
    if mode == "http" and not public_url:
        raise ValueError("http mode needs the server's public URL (--url https://...)")
    base = (public_url or "").rstrip("/")
    events: dict[str, Any] = {"bot_events": list(BOT_EVENTS)}
    interactivity: dict[str, Any] = {"is_enabled": True}
    command: dict[str, Any] = {
        "command": "/search2o",
        "description": "Link your account: /search2o link CODE",
        "usage_hint": "link CODE",
        "should_escape": False,
    }
    if mode == "http":
        events["request_url"] = f"{base}/slack/events"
        interactivity["request_url"] = f"{base}/slack/interactions"
        command["url"] = f"{base}/slack/events"
    return {
        "display_information": {
            "name": name,
            "description": "Answers from your company's knowledge, in the thread.",
        },
        "features": {
            "bot_user": {"display_name": name, "always_online": True},
            "app_home": {"messages_tab_enabled": True, "messages_tab_read_only_enabled": False},
            "slash_commands": [command],
        },
        "oauth_config": {"scopes": {"bot": sorted(BOT_SCOPES)}},
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "socket_mode_enabled": mode == "socket",
            "org_deploy_enabled": False,
            "token_rotation_enabled": False,
        },
    }


def check(settings: SlackSettings) -> list[str]:
    """Return one line per problem of the installation (empty: it works).

    Calls ``auth.test`` with the bot token (its ``X-OAuth-Scopes`` header lists the granted
    scopes) and, in Socket Mode, ``apps.connections.open`` with the app token.

    Raises:
        MissingExtraError: the ``slack`` extra (Slack's SDK) is not installed; the manifest
            itself needs nothing of it.

    """
    EXTRA.check("`search2o slack check`")
    from search2o.surfaces.slack.webapi import SlackApi, SlackCallError

    problems: list[str] = []
    if settings.signing_secret is None or not settings.signing_secret.get_secret_value():
        problems.append(
            "slack.signing_secret is not set (SEARCH2O_SLACK__SIGNING_SECRET, from the app's "
            "Basic Information page)"
        )
    if settings.bot_token is None or not settings.bot_token.get_secret_value():
        problems.append("slack.bot_token is not set (SEARCH2O_SLACK__BOT_TOKEN, xoxb-...)")
    else:
        api = SlackApi(settings.bot_token.get_secret_value(), settings.api_url, max_waits=2)
        try:
            granted = api.scopes()
        except SlackCallError as exc:
            problems.append(
                f"slack.bot_token (SEARCH2O_SLACK__BOT_TOKEN) refused by Slack: {exc.error}"
            )
        except ProviderError as exc:
            problems.append(exc.message)
        else:
            problems.extend(
                f"missing scope {scope} (needed to {why}): add it and reinstall the app"
                for scope, why in BOT_SCOPES.items()
                if scope not in granted
            )
    if settings.mode == "socket":
        if settings.app_token is None or not settings.app_token.get_secret_value():
            problems.append(
                "slack.app_token is not set: Socket Mode needs an xapp- token with "
                "connections:write (SEARCH2O_SLACK__APP_TOKEN)"
            )
        else:
            app = SlackApi(settings.app_token.get_secret_value(), settings.api_url, max_waits=2)
            try:
                app.call("apps.connections.open")
            except SlackCallError as exc:
                problems.append(
                    f"slack.app_token (SEARCH2O_SLACK__APP_TOKEN) refused by Slack: {exc.error}"
                )
            except ProviderError as exc:
                problems.append(exc.message)
    return problems
