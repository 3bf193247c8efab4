"""The slash command ``/search2o``: ``link CODE`` links the Slack account, anything else helps.

Answered in the response to Slack's request (an ephemeral message, Slack API docs, "Slash
commands"); linking is one call to our API (:meth:`search2o.client.Client.link`) in a worker
thread, bounded by the client's timeout, well within Slack's 3 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from search2o.client import Client
from search2o.errors import InputError, Search2oError

__all__ = ["HELP", "SlashCommand"]

HELP = (
    "Mention me in a channel or send me a direct message to ask. "
    "`/search2o link CODE` links your account (get a code in the search2o Web App)."
)


class SlashCommand:
    """Handle ``/search2o`` (module docstring).

    Args:
        connect: returns the process's client of our API with the surface token.

    """

    def __init__(self, connect: Callable[[], Client]) -> None:
        self.connect = connect

    async def __call__(self, form: dict[str, str]) -> dict[str, Any]:
        """Answer one command's form fields with ``{"response_type": "ephemeral", "text"}``."""
        words = form.get("text", "").split()
        if len(words) >= 2 and words[0].lower() == "link":
            text = await asyncio.to_thread(
                self._link, form.get("team_id", ""), form.get("user_id", ""), "".join(words[1:])
            )
        else:
            text = HELP
        return {"response_type": "ephemeral", "text": text}

    def _link(self, team: str, user: str, code: str) -> str:
        try:
            linked = self.connect().link(team, user, code)
        except InputError as exc:
            return f"That did not work ({exc.field}: {exc.reason})."
        except Search2oError as exc:
            return f"Linking is not available right now: {exc.message}"
        return f"Linked to {linked.email}."
