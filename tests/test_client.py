"""The typed client: its SSE parser, its error table, and every method against a real server.

The reconnect tests put a loopback TCP proxy between the client and the server that cuts
chosen connections after a number of response bytes (real sockets, a real mid-answer break),
on both database backends.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx
import pytest

import search2o.client
from search2o import accounts, errors
from search2o.agents.definition import DefinitionError
from search2o.api.app import create_app
from search2o.client import (
    ERROR_CLASSES,
    ChatEventItem,
    Client,
    SSEDecoder,
    act_as_shared,
    act_as_user,
    error_from_body,
    error_from_response,
)
from search2o.config import Settings
from search2o.events import ConversationEvent, DeltaEvent, DoneEvent
from search2o.runtime import Runtime
from search2o.wire.errors import STATUS_BY_ERROR
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder
from tests.query.doubles import DOCS, SALARIES, ScriptedChatModel, answering, ingest, open_runtime

ANSWER = " ".join(f"word{i}" for i in range(40)) + "."


# --- the SSE parser (WHATWG HTML, "Interpreting an event stream") ----------------------------


def parse(*chunks: bytes) -> tuple[list[tuple[str, str, str]], SSEDecoder]:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)] + decoder.close()
    return [(e.event, e.data, e.id) for e in events], decoder


def test_the_parser_follows_the_whatwg_examples() -> None:
    # the specification's examples: multi-line data, comments, fields without a value
    stock, _ = parse(b"data: YHOO\ndata: +2\ndata: 10\n\n")
    assert stock == [("message", "YHOO\n+2\n10", "")]
    commented, _ = parse(
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
        b"data:  third event\n\n"
    )
    assert commented == [
        ("message", "first event", "1"),
        ("message", "second event", ""),
        ("message", " third event", ""),
    ]
    empty, _ = parse(b"data\n\ndata\ndata\n\ndata:")
    assert empty == [("message", "", ""), ("message", "\n", "")]
    same, _ = parse(b"data:test\n\ndata: test\n\n")
    assert same == [("message", "test", ""), ("message", "test", "")]


def test_the_parser_keeps_ids_names_events_and_reads_retry() -> None:
    events, decoder = parse(
        b"id: 7\nevent: delta\ndata: {}\n\nevent: done\ndata: {}\n\nid: a\x00b\ndata: x\n\n"
        b"retry: 2500\n\nretry: 1s\n\nfoo: bar\ndata: y\n\n"
    )
    # the id stays until changed; one holding NUL is ignored; unknown fields are ignored
    assert events == [
        ("delta", "{}", "7"),
        ("done", "{}", "7"),
        ("message", "x", "7"),
        ("message", "y", "7"),
    ]
    assert decoder.retry_ms == 2500


def test_the_parser_splits_lines_on_cr_lf_and_crlf_only() -> None:
    events, _ = parse(b"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: \xe2\x80\xa8\x0c\x1c\n\n")
    # U+2028, form feed and FS are data, not line ends (str.splitlines would split on them)
    assert events == [
        ("message", "a", ""),
        ("message", "b", ""),
        ("message", "c", ""),
        ("message", "\u2028\x0c\x1c", ""),
    ]


def test_the_parser_handles_any_chunking_of_the_same_bytes() -> None:
    stream = '\ufeffid: 1\r\nevent: delta\r\ndata: {"text": "caf\u00e9 \u2603"}\r\n\r\n'.encode()
    whole, _ = parse(stream)
    assert whole == [("delta", '{"text": "caf\u00e9 \u2603"}', "1")]
    for size in (1, 2, 3, 5, 7):  # splits CRLF pairs and UTF-8 sequences
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert parse(*pieces)[0] == whole, size
    # an unfinished event is dropped at the end; a BOM only counts at the very start
    assert parse(b"data: x\n\ndata: z")[0] == [("message", "x", "")]
    late_bom, _ = parse(b"data: x\n\n\xef\xbb\xbfdata: y\n\n")
    assert late_bom == [("message", "x", "")]  # "\ufeffdata" is an unknown field


def test_the_parser_refuses_a_line_that_never_ends() -> None:
    decoder = SSEDecoder(max_event_chars=1000)
    decoder.feed(b"data: " + b"x" * 900)
    with pytest.raises(errors.ProviderError, match="over 1000"):
        decoder.feed(b"x" * 200)
    many = SSEDecoder(max_event_chars=1000)
    with pytest.raises(errors.ProviderError, match="event over 1000"):
        many.feed(b"data: xxxxxxxxxx\n" * 100)


# --- the error table -------------------------------------------------------------------------


def test_every_error_class_of_the_server_comes_back_as_itself() -> None:
    assert set(STATUS_BY_ERROR) <= set(ERROR_CLASSES.values())
    assert ERROR_CLASSES["DefinitionError"] is DefinitionError
    for cls, status in STATUS_BY_ERROR.items():
        body = {
            "detail": {
                "error": cls.__name__,
                "message": "what went wrong",
                "field": "f",
                "reason": "the rule",
            }
        }
        exc = error_from_body(status, body)
        assert type(exc) is cls, cls
        assert exc.message == "what went wrong" and str(exc) == "what went wrong"
        if isinstance(exc, errors.InputError):
            assert (exc.field, exc.reason) == ("f", "the rule")
    problems = [{"path": "$.functions", "reason": "is required"}]
    definition = error_from_body(
        422,
        {
            "detail": {
                "error": "DefinitionError",
                "message": "m",
                "field": "definition",
                "reason": "r",
                "problems": problems,
            }
        },
    )
    assert isinstance(definition, DefinitionError) and definition.problems == problems


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (
            500,
            {"detail": {"error": "InternalError", "message": "see the log"}},
            errors.Search2oError,
        ),
        (405, {"detail": {"error": "MethodNotAllowed", "message": "no"}}, errors.Search2oError),
        (404, {"detail": "Not Found"}, errors.NotFoundError),
        (401, None, errors.AuthenticationError),
        (403, [], errors.PermissionDeniedError),
        (409, {"detail": {"error": "NoSuchClass"}}, errors.ConflictError),
        (422, {"detail": {"message": "bad"}}, errors.InputError),
        (502, None, errors.ProviderError),
        (503, None, errors.StorageError),
    ],
)
def test_a_body_that_names_no_class_of_ours_maps_by_status(
    status: int, body: Any, cls: type
) -> None:
    exc = error_from_body(status, body)
    assert type(exc) is cls
    assert exc.message
    if isinstance(exc, errors.InputError):
        assert exc.field == "body"


def test_a_proxys_error_page_keeps_its_text() -> None:
    response = httpx.Response(502, text="<html>bad gateway</html>")
    exc = error_from_response(response)
    assert type(exc) is errors.ProviderError
    assert exc.message == "the server answered 502: <html>bad gateway</html>"


def test_the_public_names() -> None:
    for name in search2o.client.__all__:
        assert getattr(search2o.client, name) is not None
    assert act_as_user("T1", "U1") == "user:T1:U1" and act_as_shared("T1") == "shared:T1"


# --- against a real server -------------------------------------------------------------------


@contextmanager
def served(runtime: Runtime) -> Iterator[str]:
    with serve(create_app(runtime.settings, runtime=runtime)) as http:
        yield str(http.base_url)


def texts(items: list[ChatEventItem]) -> str:
    return "".join(i.event.text for i in items if isinstance(i.event, DeltaEvent))


def check_answer(items: list[ChatEventItem]) -> DoneEvent:
    """Every event once, numbered 1..n in order; conversation first, done last."""
    assert [i.id for i in items] == list(range(1, len(items) + 1))
    assert isinstance(items[0].event, ConversationEvent) and items[0].event.run_id
    done = items[-1].event
    assert isinstance(done, DoneEvent), items[-1]
    assert all(not i.event.final for i in items[:-1])
    assert texts(items) == done.text
    return done


@pytest.mark.slow
def test_every_method_against_a_local_mode_server(runtime: Runtime) -> None:
    ingest(runtime, DOCS)
    with served(runtime) as base, Client(base) as client:
        health = client.health()
        assert health.status == "ok" and health.auth_mode == "local"
        hits = client.search("where do I park my bicycle?", k=2).hits
        assert hits and hits[0].source == "upload:parking.md"

        items = list(client.chat("where do I park my bicycle?"))
        done = check_answer(items)
        assert "basement garage" in done.text
        first = items[0].event
        assert isinstance(first, ConversationEvent) and first.run_id is not None
        conversation = client.conversation(first.conversation_id)
        assert [m.role for m in conversation.messages] == ["user", "assistant"]
        assert conversation.messages[-1].text == done.text
        assert done.message_id is not None
        assert client.rate(done.message_id, "up").rating == "up"
        assert client.rate(done.message_id, None).rating is None

        # a finished run replays from any point, and its status is known
        assert [i.id for i in client.follow(first.run_id)] == [i.id for i in items]
        assert list(client.follow(first.run_id, after=3)) == items[3:]
        assert client.run(first.run_id).status == "complete"
        assert client.stop(first.run_id).status == "complete"

        follow_up = list(client.chat("and the kitchen?", conversation_id=first.conversation_id))
        check_answer(follow_up)

        with pytest.raises(errors.InputError) as empty:
            list(client.chat("   "))
        assert empty.value.field == "message"
        with pytest.raises(errors.InputError) as rating:
            client.rate(done.message_id, "meh")
        assert rating.value.field == "rating"
        with pytest.raises(errors.NotFoundError):
            client.conversation("0" * 32)
        with pytest.raises(errors.NotFoundError):
            list(client.follow("0" * 32))
        with pytest.raises(errors.NotFoundError):
            list(client.chat("hello", conversation_id="0" * 32))
    with pytest.raises(errors.ProviderError, match="cannot reach"):
        Client(base, timeout=2).health()


@pytest.mark.slow
def test_a_surface_links_acts_and_maps_threads_through_the_client(
    token_runtime: Runtime,
) -> None:
    ingest(token_runtime, DOCS)
    ingest(token_runtime, {"salaries.md": SALARIES}, groups=["hr"])
    with token_runtime.database.session() as session:
        ann = accounts.create_user(session, "ann@example.com", groups=["hr"])
        ann_token = accounts.issue_token(session, ann)
        slack_token = accounts.issue_surface_token(session, "slack")
        telegram_token = accounts.issue_surface_token(session, "telegram")
    with (
        served(token_runtime) as base,
        Client(base, ann_token) as user,
        Client(base, slack_token) as slack,
        Client(base, telegram_token) as telegram,
    ):
        code = user.create_link_code(surface="slack")
        assert code.surface == "slack"
        assert slack.identity("T1", "U1") is None
        linked = slack.link("T1", "U1", code.code)
        assert (linked.email, linked.linked_by) == ("ann@example.com", "code")
        assert slack.identity("T1", "U1") == linked
        with pytest.raises(errors.InputError) as replay:
            slack.link("T1", "U2", code.code)
        assert replay.value.field == "code"
        assert slack.link_by_email("T1", "U3", "nobody@example.com") is None
        assert slack.link_by_email("T1", "U3", "ann@example.com") is not None
        slack.unlink("T1", "U3")
        with pytest.raises(errors.NotFoundError):
            slack.unlink("T1", "U3")

        dm = slack.acting_as(act_as_user("T1", "U1"))
        channel = slack.acting_as(act_as_shared("T1"))
        assert "upload:salaries.md" in {h.source for h in dm.search("salary band level 3").hits}
        assert "upload:salaries.md" not in {
            h.source for h in channel.search("salary band level 3").hits
        }
        assert channel.conversation_for_thread("T1", "C1", "1700.1") is None
        items = list(channel.chat("How many vacation days do we get?"))
        first = check_answer(items)
        mapped = channel.remember_thread("T1", "C1", "1700.1", first.conversation_id)
        assert mapped.created and mapped.conversation_id == first.conversation_id
        assert channel.conversation_for_thread("T1", "C1", "1700.1") == first.conversation_id
        assert dm.conversation_for_thread("T1", "C1", "1700.1") is None
        mine = next(iter(dm.chat("hello"))).event
        assert isinstance(mine, ConversationEvent)
        with pytest.raises(errors.ConflictError):
            dm.remember_thread("T1", "C1", "1700.1", mine.conversation_id)

        with pytest.raises(errors.AuthenticationError):
            slack.search("anything")  # a surface token names whom it acts for
        with pytest.raises(errors.PermissionDeniedError):
            telegram.acting_as(act_as_user("T1", "U1")).search("anything")
        with pytest.raises(errors.PermissionDeniedError):
            dm.create_link_code()
        with pytest.raises(errors.InputError) as header:
            slack.acting_as("user:T1").search("anything")
        assert header.value.field == "X-Search2o-Act-As"


# --- reconnecting ----------------------------------------------------------------------------


class CuttingProxy:
    """A loopback TCP proxy; the n-th answer stream's connection is cut after ``cuts[n]`` bytes.

    An answer stream is a connection whose first request is ``POST /v1/chat`` or ``GET
    /v1/runs/.../events``; ``None`` (or a stream past the list) passes through whole. Other
    connections pass through. ``heads`` records each stream's request head.
    """

    def __init__(self, upstream: tuple[str, int], cuts: list[int | None]) -> None:
        self.upstream = upstream
        self.cuts = list(cuts)
        self.heads: list[bytes] = []
        self.cut = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        head = client.recv(65536)
        line = head.split(b"\r\n", 1)[0]
        stream = line.startswith(b"POST /v1/chat ") or (
            line.startswith(b"GET /v1/runs/") and b"/events" in line
        )
        budget: int | None = None
        if stream:
            with self.lock:
                self.heads.append(head)
                index = len(self.heads) - 1
                budget = self.cuts[index] if index < len(self.cuts) else None
        upstream.sendall(head)
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        sent = 0
        try:
            while budget is None or sent < budget:
                data = upstream.recv(65536 if budget is None else min(65536, budget - sent))
                if not data:
                    break
                client.sendall(data)
                sent += len(data)
            else:
                with self.lock:
                    self.cut += 1
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self.listener.close()

    def last_event_ids(self) -> list[int]:
        """The ``Last-Event-ID`` each resumed stream asked for."""
        found = []
        for head in self.heads:
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"last-event-id:"):
                    found.append(int(line.split(b":", 1)[1]))
        return found


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass


@contextmanager
def slow_server(
    settings: Settings, embedder: MemoEmbedder, cuts: list[int | None]
) -> Iterator[tuple[Runtime, CuttingProxy, str]]:
    model = ScriptedChatModel(answering(ANSWER, pause=0.03))
    with open_runtime(settings, embedder, model=model) as rt, served(rt) as base:
        url = httpx.URL(base)
        proxy = CuttingProxy((url.host, url.port or 80), cuts)
        try:
            yield rt, proxy, base
        finally:
            proxy.close()


def consume(
    client: Client, message: str, on_item: Callable[[ChatEventItem], None] | None = None
) -> list[ChatEventItem]:
    items = []
    for item in client.chat(message):
        items.append(item)
        if on_item is not None:
            on_item(item)
    return items


@pytest.mark.slow
def test_a_stream_cut_mid_answer_is_resumed_and_every_event_arrives_once(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    # the chat stream is cut after 900 bytes, the first resume after 700: two breaks
    with slow_server(settings, embedder, [900, 700]) as (_, proxy, base):
        with Client(proxy.base_url, backoff_s=0.05) as client:
            items = consume(client, "tell me a long story")
        done = check_answer(items)
        assert done.text.strip() == ANSWER
        assert proxy.cut == 2 and len(proxy.heads) == 3
        resumed = proxy.last_event_ids()
        assert len(resumed) == 2 and 1 <= resumed[0] < resumed[1] < items[-1].id
        with Client(base) as direct:  # the stored answer is what the client assembled
            first = items[0].event
            assert isinstance(first, ConversationEvent)
            stored = direct.conversation(first.conversation_id).messages[-1]
            assert stored.text == texts(items) == done.text
            assert stored.status == "complete"


@pytest.mark.slow
def test_reconnects_are_bounded_and_a_stream_broken_before_its_first_event_is_not_resent(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    with (
        slow_server(settings, embedder, [0]) as (_, proxy, _base),
        Client(proxy.base_url, backoff_s=0.01) as client,
    ):
        with pytest.raises(errors.ProviderError, match="may or may not have been taken"):
            list(client.chat("tell me a long story"))
        assert len(proxy.heads) == 1  # no second POST
    # every resume is cut before a byte arrives: three reconnects, then the caller is told
    with slow_server(settings, embedder, [900, 0, 0, 0, 0]) as (_, proxy, base):
        with Client(proxy.base_url, retries=3, backoff_s=0.01) as client:
            seen: list[ChatEventItem] = []
            refused = pytest.raises(errors.ProviderError, match="3 reconnects in a row failed")
            with refused as gave_up:
                consume(client, "tell me a long story", seen.append)
        assert len(proxy.heads) == 1 + 3
        assert seen and [i.id for i in seen] == list(range(1, len(seen) + 1))
        first = seen[0].event
        assert isinstance(first, ConversationEvent) and first.run_id is not None
        assert f"after={seen[-1].id}" in gave_up.value.message
        # the answer went on without the client; following it later gets the rest once
        with Client(base) as direct:
            rest = list(direct.follow(first.run_id, after=seen[-1].id))
        check_answer(seen + rest)
