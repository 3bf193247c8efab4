"""``GET /metrics``: Prometheus metrics (:mod:`search2o.observability.metrics`), protected.

Outside ``/v1`` and the OpenAPI document: it is for scrapers, in Prometheus's text format.
``metrics.enabled`` false answers 404; with ``metrics.token`` a scrape sends it as a bearer
token (compared in constant time, RFC 6750 section 2.1), from any address; without it only
loopback peers may scrape (:func:`~search2o.netpolicy.is_loopback_host`). Refusals are 401.
"""

from __future__ import annotations

import asyncio
import hmac

from fastapi import APIRouter, Request, Response

from search2o.api.deps import RuntimeDep
from search2o.errors import AuthenticationError, NotFoundError
from search2o.netpolicy import is_loopback_host
from search2o.observability.metrics import CONTENT_TYPE, render

router = APIRouter(include_in_schema=False)


@router.get("/metrics")
async def metrics(request: Request, runtime: RuntimeDep) -> Response:
    """Answer a scrape (see the module docstring).

    Raises:
        NotFoundError: ``metrics.enabled`` is false.
        AuthenticationError: a wrong or missing token, or no token set and a remote peer.

    """
    settings = runtime.settings.metrics
    if not settings.enabled:
        raise NotFoundError("metrics are off (metrics.enabled = false)")
    if settings.token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        expected = settings.token.get_secret_value().encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            raise AuthenticationError("a scrape needs `Authorization: Bearer <metrics.token>`")
    else:
        peer = request.client.host if request.client else None
        if peer is not None and not is_loopback_host(peer):
            raise AuthenticationError(
                "metrics answer loopback peers only; set metrics.token (SEARCH2O_METRICS__TOKEN) "
                "to scrape from elsewhere"
            )
    # Not the request thread pool: a scrape must answer while that pool is saturated.
    body = await asyncio.to_thread(render, runtime.database)
    return Response(body, media_type=CONTENT_TYPE)
