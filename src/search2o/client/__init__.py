"""The typed Python client of the search2o HTTP API: the one way surfaces call the server.

::

    from search2o.client import Client, act_as_user

    with Client("https://search2o.example.com", SURFACE_TOKEN) as client:
        ann = client.acting_as(act_as_user("T0123", "U0456"))
        for item in ann.chat("How many vacation days do we get?"):
            if item.kind == "delta":
                print(item.event.text, end="")

* :class:`Client` (:mod:`search2o.client.api`): chat and follow with automatic reconnect
  (``Last-Event-ID``), stop, rate, search, conversations, health, and the surface endpoints
  (link codes, identities, threads).
* :class:`SSEDecoder` (:mod:`search2o.client.sse`): the WHATWG event-stream parser.
* :func:`error_from_response` (:mod:`search2o.client.failures`): an error response as the
  server's own exception class.
"""

from search2o.client.api import ChatEventItem, Client, act_as_shared, act_as_user
from search2o.client.failures import ERROR_CLASSES, error_from_body, error_from_response
from search2o.client.sse import ServerSentEvent, SSEDecoder

__all__ = [
    "ERROR_CLASSES",
    "ChatEventItem",
    "Client",
    "SSEDecoder",
    "ServerSentEvent",
    "act_as_shared",
    "act_as_user",
    "error_from_body",
    "error_from_response",
]
