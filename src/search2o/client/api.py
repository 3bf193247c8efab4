""":class:`Client`: the typed, synchronous client of the search2o HTTP API.

Synchronous only, on one :class:`httpx.Client` (its connection pool is shared by every
:meth:`Client.acting_as` view): surfaces answer from job workers and webhook handlers that
block, and one code path cannot drift from a hand-copied async twin. An async surface calls it
in a worker thread.

Answers (:meth:`Client.chat`, :meth:`Client.follow`) are iterators of
:class:`ChatEventItem` — the event's number in its run and the typed event of
:mod:`search2o.events` — parsed from Server-Sent Events (:mod:`search2o.client.sse`). When the
stream breaks before the final event (``done`` or ``error``) the client reconnects to
``GET /v1/runs/{run_id}/events`` with ``Last-Event-ID`` set to the last number it yielded and
goes on, so the caller sees every event exactly once and in order. Reconnects are bounded
(``retries`` in a row without a new event) with exponential backoff from ``backoff_s`` (or the
stream's ``retry:``) up to ``max_backoff_s``. A stream that breaks before its first event is
not retried: the message may or may not have been taken, and sending it twice would answer it
twice; that is a :class:`~search2o.errors.ProviderError` for the caller to decide.

Errors are the server's exception classes (:mod:`search2o.client.failures`); a server that
cannot be reached, or a stream that stays broken, is a :class:`~search2o.errors.ProviderError`
(the server is the client's provider of answers).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from search2o.client.failures import error_from_response
from search2o.client.sse import SSEDecoder
from search2o.errors import NotFoundError, ProviderError
from search2o.events import ConversationEvent, Event, event_from
from search2o.wire.chat import ConversationDetailPublic, MessagePublic
from search2o.wire.names import ACT_AS_HEADER
from search2o.wire.runs import RunPublic
from search2o.wire.schemas import HealthPublic, SearchPublic
from search2o.wire.surfaces import IdentityPublic, LinkCodePublic, ThreadPublic

__all__ = ["ChatEventItem", "Client", "act_as_shared", "act_as_user"]

M = TypeVar("M", bound=BaseModel)
_RETRYABLE = frozenset({502, 503, 504})


def act_as_user(workspace: str, external_user_id: str) -> str:
    """Return the ``X-Search2o-Act-As`` value of a linked account: ``user:<ws>:<id>``."""
    return f"user:{workspace}:{external_user_id}"


def act_as_shared(workspace: str) -> str:
    """Return the ``X-Search2o-Act-As`` value of a workspace's shared channels."""
    return f"shared:{workspace}"


@dataclass(frozen=True)
class ChatEventItem:
    """One event of an answer and its number in the run (its SSE ``id``, from 1).

    Attributes:
        id: the event's number; strictly increasing within a run.
        event: the typed event (:mod:`search2o.events`).

    """

    id: int
    event: Event

    @property
    def kind(self) -> str:
        """The event's kind: ``conversation``, ``delta``, ``done`` ..."""
        return self.event.kind


class Client:
    """The search2o API over HTTP.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        token: a bearer token (a user's, or a surface's service token); ``None`` for a
            local-mode server from its own machine.
        act_as: ``X-Search2o-Act-As`` for every request (surface tokens only); see
            :func:`act_as_user`, :func:`act_as_shared` and :meth:`acting_as`.
        timeout: seconds for connecting, and for each read (a stream longer silent than this
            reconnects; the server sends a heartbeat every ``chat.heartbeat_s``, 10 s).
        retries: reconnects in a row, without a new event in between, before giving up.
        backoff_s: the first wait before a reconnect; doubled each time.
        max_backoff_s: the longest wait.

    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        act_as: str | None = None,
        timeout: float = 30.0,
        retries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)
        self._owner = True
        self.act_as = act_as
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s

    def acting_as(self, act_as: str | None) -> Client:
        """Return a view of this client acting as ``act_as``, on the same connections.

        Closing the view does nothing; close the client that made it.
        """
        view = Client.__new__(Client)
        view.__dict__.update(self.__dict__)
        view._owner = False
        view.act_as = act_as
        return view

    def close(self) -> None:
        """Close the connections (of a client made with the constructor)."""
        if self._owner:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {ACT_AS_HEADER: self.act_as} if self.act_as is not None else {}
        return {**headers, **(extra or {})}

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send one request; return a 2xx response.

        Raises:
            Search2oError: the error the server answered (its own class).
            ProviderError: the server could not be reached.

        """
        try:
            response = self._http.request(method, path, headers=self._headers(), **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        if response.is_error:
            raise error_from_response(response)
        return response

    def _model(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        response = self._request(method, path, **kwargs)
        try:
            return model.model_validate(response.json())
        except ValueError as exc:
            raise ProviderError(
                f"the server's answer to {method} {path} is not a {model.__name__}: {exc}"
            ) from exc

    def _unreachable(self, exc: Exception) -> ProviderError:
        return ProviderError(f"cannot reach the search2o server at {self._http.base_url}: {exc}")

    # --- answers --------------------------------------------------------------------------------

    def chat(
        self,
        message: str,
        conversation_id: str | None = None,
        agent: str | None = None,
        inputs: dict[str, Any] | None = None,
    ) -> Iterator[ChatEventItem]:
        """Send one message (``POST /v1/chat``) and yield its answer's events, each once.

        The first event is ``conversation`` (with ``conversation_id`` and ``run_id``); the last
        is ``done`` or ``error``. A stream that breaks in between is resumed (module docstring).

        Raises:
            InputError: a bad message or inputs (field and reason from the server).
            NotFoundError: the conversation or agent is missing or another principal's.
            AuthenticationError, PermissionDeniedError: as the server answered.
            ProviderError: the server could not be reached, the stream broke before its first
                event, or stayed broken for ``retries`` reconnects.

        """
        body: dict[str, Any] = {"message": message}
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        if agent is not None:
            body["agent"] = agent
        if inputs is not None:
            body["inputs"] = inputs

        def first() -> AbstractContextManager[httpx.Response]:
            return self._http.stream("POST", "/v1/chat", json=body, headers=self._headers())

        return self._events(first, None, 0)

    def follow(self, run_id: str, after: int = 0) -> Iterator[ChatEventItem]:
        """Yield a run's events after number ``after``, then live ones, until it ends.

        Raises:
            NotFoundError: the run is missing, finished long ago, or another principal's.
            ProviderError: as :meth:`chat`.

        """
        return self._events(None, run_id, after)

    def _resume(self, run_id: str, after: int) -> AbstractContextManager[httpx.Response]:
        path = f"/v1/runs/{quote(run_id, safe='')}/events"
        headers = self._headers({"Last-Event-ID": str(after)})
        return self._http.stream("GET", path, headers=headers)

    def _events(
        self,
        first: Callable[[], AbstractContextManager[httpx.Response]] | None,
        run_id: str | None,
        after: int,
    ) -> Iterator[ChatEventItem]:
        """Yield events from ``first()`` (or the run), reconnecting until the final one."""
        last, failures = after, 0
        opened = first
        retry_ms: int | None = None
        while True:
            if opened is None:
                assert run_id is not None
                opened = functools.partial(self._resume, run_id, last)
            broke: str
            decoder = SSEDecoder()
            try:
                with opened() as response:
                    if response.is_error:
                        response.read()
                        failure = error_from_response(response)
                        if first is not None and opened is first:
                            raise failure
                        if response.status_code not in _RETRYABLE:
                            raise failure
                        broke = failure.message
                    else:
                        for item in self._decode(response, decoder):
                            if item.id <= last:
                                continue  # sent before the reconnect: seen already
                            last, failures = item.id, 0
                            if isinstance(item.event, ConversationEvent) and item.event.run_id:
                                run_id = item.event.run_id
                            yield item
                            if item.event.final:
                                return
                        broke = "the stream ended before its last event"
            except httpx.TransportError as exc:
                broke = str(exc) or type(exc).__name__
            if decoder.retry_ms is not None:  # the stream's own reconnection time (WHATWG)
                retry_ms = decoder.retry_ms
            if run_id is None:
                raise ProviderError(
                    f"the answer's stream broke before its first event ({broke}); the message "
                    "may or may not have been taken: look at the conversation before sending "
                    "it again"
                )
            failures += 1
            if failures > self.retries:
                raise ProviderError(
                    f"the stream of run {run_id} broke, and {failures - 1} reconnects in a row "
                    f"failed ({broke}); "
                    f"follow it later with Client.follow({run_id!r}, after={last})"
                )
            base = retry_ms / 1000 if retry_ms is not None else self.backoff_s
            time.sleep(min(base * 2 ** (failures - 1), self.max_backoff_s))
            opened = None

    def _decode(self, response: httpx.Response, decoder: SSEDecoder) -> Iterator[ChatEventItem]:
        """Yield the typed events of an SSE response as its bytes arrive.

        Raises:
            ProviderError: an event that is not one of ours (kind, payload or id).

        """
        for chunk in response.iter_bytes():
            for frame in decoder.feed(chunk):
                yield _typed(frame.event, frame.data, frame.id)
        for frame in decoder.close():
            yield _typed(frame.event, frame.data, frame.id)

    def run(self, run_id: str) -> RunPublic:
        """Return a run's status and the number of its last event (``GET /v1/runs/{id}``).

        Raises:
            NotFoundError: missing or another principal's.

        """
        return self._model(RunPublic, "GET", f"/v1/runs/{quote(run_id, safe='')}")

    def stop(self, run_id: str) -> RunPublic:
        """Stop a run (``POST /v1/runs/{id}/stop``); its partial answer is kept interrupted.

        Raises:
            NotFoundError: missing or another principal's.

        """
        return self._model(RunPublic, "POST", f"/v1/runs/{quote(run_id, safe='')}/stop")

    # --- conversations and knowledge ------------------------------------------------------------

    def rate(self, message_id: str, rating: str | None) -> MessagePublic:
        """Rate an answer ``up`` or ``down``, or clear it with ``None``.

        Raises:
            InputError: a bad rating, or the message is no answer.
            NotFoundError: missing or another principal's.

        """
        path = f"/v1/messages/{quote(message_id, safe='')}/rating"
        return self._model(MessagePublic, "PUT", path, json={"rating": rating})

    def conversation(self, conversation_id: str) -> ConversationDetailPublic:
        """Return a conversation with its messages.

        Raises:
            NotFoundError: missing or another principal's.

        """
        path = f"/v1/conversations/{quote(conversation_id, safe='')}"
        return self._model(ConversationDetailPublic, "GET", path)

    def search(self, query: str, k: int = 5) -> SearchPublic:
        """Search the knowledge the principal may read; up to ``k`` hits, best first.

        Raises:
            InputError: an empty or too long query, a bad ``k``.

        """
        return self._model(SearchPublic, "POST", "/v1/search", json={"query": query, "k": k})

    def health(self) -> HealthPublic:
        """Return the server's status, version, database backend and auth mode."""
        return self._model(HealthPublic, "GET", "/v1/health")

    # --- surfaces -------------------------------------------------------------------------------

    def create_link_code(self, surface: str | None = None, minutes: int = 15) -> LinkCodePublic:
        """Mint a one-time link code for the calling user (their own token, not a surface's).

        Raises:
            InputError: a bad surface or minutes.
            PermissionDeniedError: a surface token acts for the user.

        """
        body = {"surface": surface, "minutes": minutes}
        return self._model(LinkCodePublic, "POST", "/v1/surfaces/link-codes", json=body)

    def link(self, workspace: str, external_user_id: str, code: str) -> IdentityPublic:
        """Link an account of this surface token's surface with the code its person typed.

        Raises:
            InputError: a bad name; the code is malformed, or unknown, used, expired or for
                another surface (``field == "code"``, one reason for the four).
            PermissionDeniedError: not a surface token.

        """
        body = {"workspace": workspace, "external_user_id": external_user_id, "code": code}
        return self._model(IdentityPublic, "POST", "/v1/surfaces/identities", json=body)

    def link_by_email(
        self, workspace: str, external_user_id: str, email: str
    ) -> IdentityPublic | None:
        """Link an account to the user with the email its platform verified.

        Returns:
            the link (an existing one is kept), or ``None`` when no user has the email.

        Raises:
            InputError: a bad name or email.
            PermissionDeniedError: not a surface token.

        """
        body = {"workspace": workspace, "external_user_id": external_user_id, "email": email}
        try:
            return self._model(IdentityPublic, "POST", "/v1/surfaces/identities", json=body)
        except NotFoundError:
            return None

    def identity(self, workspace: str, external_user_id: str) -> IdentityPublic | None:
        """Return the link of an account of this surface, or ``None`` when it is not linked.

        Raises:
            InputError: a bad name.
            PermissionDeniedError: not a surface token.

        """
        try:
            return self._model(IdentityPublic, "GET", _identity_path(workspace, external_user_id))
        except NotFoundError:
            return None

    def unlink(self, workspace: str, external_user_id: str) -> None:
        """Unlink an account of this surface.

        Raises:
            NotFoundError: it is not linked.
            PermissionDeniedError: not a surface token.

        """
        self._request("DELETE", _identity_path(workspace, external_user_id))

    def conversation_for_thread(self, workspace: str, channel: str, thread: str) -> str | None:
        """Return the conversation the acting principal continues in a thread, or ``None``.

        Raises:
            InputError: a bad name.
            AuthenticationError: no ``act_as``.
            PermissionDeniedError: not a surface token, or an account not linked on it.

        """
        try:
            found = self._model(ThreadPublic, "GET", _thread_path(workspace, channel, thread))
        except NotFoundError:
            return None
        return found.conversation_id

    def remember_thread(
        self, workspace: str, channel: str, thread: str, conversation_id: str
    ) -> ThreadPublic:
        """Map a thread to the conversation its first message started (the first one wins).

        Raises:
            NotFoundError: the conversation is missing or another principal's.
            ConflictError: the thread continues another principal's conversation.
            InputError, AuthenticationError, PermissionDeniedError: as
                :meth:`conversation_for_thread`.

        """
        path = _thread_path(workspace, channel, thread)
        return self._model(ThreadPublic, "PUT", path, json={"conversation_id": conversation_id})


def _identity_path(workspace: str, external_user_id: str) -> str:
    return f"/v1/surfaces/identities/{quote(workspace, safe='')}/{quote(external_user_id, safe='')}"


def _thread_path(workspace: str, channel: str, thread: str) -> str:
    parts = "/".join(quote(p, safe="") for p in (workspace, channel, thread))
    return f"/v1/surfaces/threads/{parts}"


def _typed(kind: str, data: str, number: str) -> ChatEventItem:
    """Return the typed event of one SSE frame.

    Raises:
        ProviderError: the frame is not one of ours.

    """
    try:
        if not (number.isascii() and number.isdigit()):
            raise ValueError(f"event id {number[:20]!r} is not a number")
        return ChatEventItem(int(number), event_from(kind, json.loads(data)))
    except ValueError as exc:
        raise ProviderError(f"the server sent an event that is not one of ours: {exc}") from exc
