"""The 👍/👎 buttons of an answer, and the proof that a click's ``context`` is ours.

Mattermost does not sign the callbacks of interactive buttons: a click is a plain ``POST`` to
the action's ``integration.url`` with the ``context`` the post was created with (Mattermost
docs, "Interactive messages"). Anyone who can reach the URL could send one, so the context
carries ``sig = hex(HMAC-SHA256(key, "mattermost.rate:<delivery>:<rating>"))`` (RFC 2104,
through :func:`search2o.signing.hmac_sha256_hex`; compared in constant time with
:func:`search2o.signing.any_matches`). The key is derived from the bot token,
``HMAC-SHA256(bot token, "search2o mattermost button context v1")``: a secret only this
server and Mattermost hold, that needs no setting of its own; rotating the bot token expires
every earlier button (a click then says so and stores nothing).
"""

from __future__ import annotations

from typing import Any

from search2o.signing import any_matches, hmac_sha256_hex

__all__ = ["ACTIONS_PATH", "button_key", "keyboard", "verify_context"]

ACTIONS_PATH = "/mattermost/actions"
_LABEL = b"search2o mattermost button context v1"
RATINGS = ("up", "down")


def button_key(bot_token: str) -> str:
    """Return the HMAC key of button contexts, derived from the bot token (module docstring)."""
    return hmac_sha256_hex(bot_token, _LABEL)


def _signature(key: str, delivery_id: int, rating: str) -> str:
    return hmac_sha256_hex(key, f"mattermost.rate:{delivery_id}:{rating}".encode())


def keyboard(key: str, url: str, delivery_id: int) -> dict[str, Any]:
    """Return the post ``props`` with the two rating buttons calling ``url``."""
    actions = [
        {
            "id": f"rate{rating}",
            "name": "👍" if rating == "up" else "👎",
            "type": "button",
            "integration": {
                "url": url,
                "context": {
                    "delivery": delivery_id,
                    "rating": rating,
                    "sig": _signature(key, delivery_id, rating),
                },
            },
        }
        for rating in RATINGS
    ]
    return {"attachments": [{"text": "", "actions": actions}]}


def verify_context(key: str, context: object) -> tuple[int, str] | None:
    """Return ``(delivery id, rating)`` of a genuine context, ``None`` for anything else."""
    if not isinstance(context, dict):
        return None
    delivery, rating, sig = context.get("delivery"), context.get("rating"), context.get("sig")
    if not isinstance(delivery, int) or isinstance(delivery, bool) or rating not in RATINGS:
        return None
    if not isinstance(sig, str) or not any_matches(_signature(key, delivery, str(rating)), sig):
        return None
    return delivery, str(rating)
