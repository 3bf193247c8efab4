"""The webhook of Telegram: ``POST /telegram/webhook``.

Telegram sends each update as a JSON body with the secret given to ``setWebhook`` in the
``X-Telegram-Bot-Api-Secret-Token`` header (Bot API "setWebhook"). The header is compared with
``telegram.secret_token`` in constant time (:func:`hmac.compare_digest`); a request without it,
or with another, answers 401 and records nothing. A verified update goes through the pipeline
and is answered an empty 200 at once — Telegram sends it again after any non-2xx answer (or no
answer within about a minute), and the pipeline's dedupe makes that harmless. A body that is
not a JSON object answers 400. Bodies are bounded by the API's ingress (``api.max_body_bytes``).
"""

from __future__ import annotations

import asyncio
import hmac

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from search2o.api.errors import error_response
from search2o.api.jsonbody import parse_json_body
from search2o.errors import AuthenticationError
from search2o.surfaces.telegram.pipeline import TelegramPipeline
from search2o.surfaces.telegram.settings import TelegramSettings

__all__ = ["SECRET_HEADER", "WEBHOOK_PATH", "TelegramWebhook"]

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class TelegramWebhook:
    """The route of Telegram's webhook mode.

    Args:
        settings: the ``telegram`` section (its ``secret_token`` must be set).
        pipeline: where verified updates go.

    """

    def __init__(self, settings: TelegramSettings, pipeline: TelegramPipeline) -> None:
        assert settings.secret_token is not None
        self._secret = settings.secret_token.get_secret_value().encode()
        self.pipeline = pipeline

    def routes(self) -> list[BaseRoute]:
        """Return ``POST /telegram/webhook``."""
        return [Route(WEBHOOK_PATH, self.endpoint, methods=["POST"])]

    async def endpoint(self, request: Request) -> Response:
        """Verify the secret, then take one update (module docstring)."""
        given = (request.headers.get(SECRET_HEADER) or "").encode()
        if not hmac.compare_digest(given, self._secret):
            return error_response(
                AuthenticationError("the request's Telegram secret token is missing or wrong")
            )
        try:
            update = parse_json_body(await request.body())
        except ValueError:
            return Response(status_code=400)
        if not isinstance(update, dict):
            return Response(status_code=400)
        await asyncio.to_thread(self.pipeline.take, update)
        return Response(status_code=200)
