"""Enterprise state hooks: the conversation state kept by the enterprise, not by us.

An enterprise implements three operations (:class:`StateHook`), as a Python entry point in the
group ``search2o.state_hooks`` or as an HTTP service:

* ``save(conversation_id, user_email, state, expected_version) -> version``: store ``state``
  (the plain JSON form of :class:`~search2o.state.model.ConversationState`) if the stored
  version is still ``expected_version`` (0 = none yet), and return the new version (an integer
  greater than ``expected_version``). Otherwise refuse: conflict (version moved on) or not found
  (another user's conversation, or one deleted before).
* ``restore(conversation_id, user_email) -> {"state": {...}, "version": n} | None``: ``None``
  when there is no state for this conversation *and* this email (another user's is answered
  the same way).
* ``delete_conversation(conversation_id, user_email)``: delete the state for good and keep a
  tombstone, so a run still in flight cannot save it back (later saves: not found).

The hook records the owner's email with the first save and checks it on every call. A Python
hook signals a conflict by raising :class:`~search2o.errors.ConflictError` and a missing
conversation by raising :class:`~search2o.errors.NotFoundError`; anything else it raises is a
failure. The HTTP wire contract (docs/conversation-state.md):

=========================  ==========================================  ======================
request (``POST``, JSON)   body                                        success
=========================  ==========================================  ======================
``{url}/save``             ``conversation_id, user_email, state,``     200 ``{"version": n}``
                           ``expected_version``
``{url}/restore``          ``conversation_id, user_email``             200 ``{"state", "version"}``
``{url}/delete``           ``conversation_id, user_email``             200 or 204
=========================  ==========================================  ======================

404 means not found (``restore``: no state → ``None``), 409 a version conflict (``save``),
401/403 a refused signature; any other status is a failure. Every request is signed with
``state.hook_secret`` (:mod:`search2o.signing`: ``X-Search2o-Timestamp``,
``X-Search2o-Signature: v1=<hex>`` = HMAC-SHA256 over ``"{timestamp}.POST.{path}.{body}"``).

A hook that fails, times out (``state.hook_timeout_s``) or returns malformed data raises
:class:`~search2o.errors.HookError` naming the hook and the reason; nothing is changed on our
side (with hooks we keep only the conversation's entry, and the save is not retried: a retry of
a save that did land would be a conflict). :func:`build_state_store` picks the store from the
settings; validation runs always use our :class:`~search2o.state.store.DatabaseStateStore`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import httpx
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.crypto.vault import Vault
from search2o.errors import ConfigError, ConflictError, HookError, InputError, NotFoundError
from search2o.plugins import check_members, load_factory
from search2o.signing import signed_headers
from search2o.state.changes import StateChanges, apply
from search2o.state.contract import (
    StateStore,
    check_expected_version,
    conversation_owner,
    missing_conversation,
    state_conflict,
)
from search2o.state.model import ConversationState
from search2o.state.settings import StateSettings
from search2o.state.store import DatabaseStateStore
from search2o.storage.db import Database

if TYPE_CHECKING:
    from search2o.config import Settings

__all__ = [
    "ENTRY_POINT_GROUP",
    "HookStateStore",
    "HttpStateHook",
    "StateHook",
    "build_state_store",
    "load_state_hook",
]

ENTRY_POINT_GROUP = "search2o.state_hooks"
_OPERATIONS = ("save", "restore", "delete_conversation")
_ID = re.compile(r"^[0-9a-f]{32}$")
T = TypeVar("T")


@runtime_checkable
class StateHook(Protocol):
    """The enterprise's implementation (see the module docstring for the contract)."""

    def save(
        self, conversation_id: str, user_email: str, state: dict[str, Any], expected_version: int
    ) -> int:
        """Store ``state`` if the version is still ``expected_version``; return the new one."""
        ...

    def restore(self, conversation_id: str, user_email: str) -> dict[str, Any] | None:
        """Return ``{"state": {...}, "version": n}``, or ``None`` (none, or not this email's)."""
        ...

    def delete_conversation(self, conversation_id: str, user_email: str) -> None:
        """Delete the state for good (later saves are refused as not found)."""
        ...


def _public_url(url: str) -> str:
    """Return the URL without credentials, query or fragment (safe in errors and logs)."""
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path.rstrip('/')}"


class HttpStateHook:
    """A :class:`StateHook` served over HTTP: signed JSON ``POST`` s (module docstring).

    Args:
        url: the base URL; requests go to ``{url}/save``, ``{url}/restore``, ``{url}/delete``.
        secret: the HMAC-SHA256 signing key shared with the service.
        timeout_s: the limit for each request (connect, write, read).

    Raises (from every call):
        HookError: timeout, connection failure, a refused signature (401/403), another
            unexpected status, or a reply that is not the documented JSON.
        ConflictError: ``save`` answered 409.
        NotFoundError: ``save``/``delete_conversation`` answered 404.

    """

    def __init__(self, url: str, secret: str, timeout_s: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"state hook URL {url!r} must start with http:// or https://")
        self.name = _public_url(url)
        self._base = url.rstrip("/")
        self._secret = secret
        self._timeout = timeout_s
        self._client = httpx.Client(timeout=timeout_s, follow_redirects=False)

    def save(
        self, conversation_id: str, user_email: str, state: dict[str, Any], expected_version: int
    ) -> int:
        """``POST {url}/save``; return the ``version`` the service answered (unchecked)."""
        reply = self._post(
            "save",
            "/save",
            {
                "conversation_id": conversation_id,
                "user_email": user_email,
                "state": state,
                "expected_version": expected_version,
            },
        )
        body = None if reply is None else self._json("save", reply)
        if not isinstance(body, dict) or "version" not in body:
            raise HookError(self.name, "save", 'replied without {"version": <int>}')
        version: int = body["version"]
        return version

    def restore(self, conversation_id: str, user_email: str) -> dict[str, Any] | None:
        """``POST {url}/restore``; ``None`` on 404, else the reply object (unchecked)."""
        reply = self._post(
            "restore",
            "/restore",
            {"conversation_id": conversation_id, "user_email": user_email},
            not_found_is_none=True,
        )
        if reply is None:
            return None
        body = self._json("restore", reply)
        if not isinstance(body, dict):
            raise HookError(self.name, "restore", "replied with JSON that is not an object")
        return body

    def delete_conversation(self, conversation_id: str, user_email: str) -> None:
        """``POST {url}/delete``; any 2xx status is success."""
        self._post(
            "delete_conversation",
            "/delete",
            {"conversation_id": conversation_id, "user_email": user_email},
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _post(
        self,
        operation: str,
        suffix: str,
        payload: dict[str, Any],
        *,
        not_found_is_none: bool = False,
    ) -> httpx.Response | None:
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = body.encode("utf-8")
        url = httpx.URL(self._base + suffix)
        headers = {"Content-Type": "application/json"}
        headers.update(signed_headers(self._secret, "POST", url.raw_path.decode("ascii"), data))
        try:
            reply = self._client.post(url, content=data, headers=headers)
        except httpx.TimeoutException:
            raise HookError(self.name, operation, f"timed out after {self._timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise HookError(
                self.name, operation, f"cannot reach it ({type(exc).__name__}: {exc})"
            ) from None
        status = reply.status_code
        if 200 <= status < 300:
            return reply
        if status == 404:
            if not_found_is_none:
                return None
            raise NotFoundError(f"conversation {payload['conversation_id']!r} not found")
        if status == 409 and operation == "save":
            raise state_conflict(
                str(payload["conversation_id"]), "the state hook refused the version (409)"
            )
        if status in (401, 403):
            raise HookError(
                self.name,
                operation,
                f"refused our signature (HTTP {status}); check that state.hook_secret matches "
                "the hook's secret and that both clocks are right",
            )
        raise HookError(self.name, operation, f"answered HTTP {status}")

    def _json(self, operation: str, reply: httpx.Response) -> Any:
        try:
            return json.loads(reply.content)
        except (ValueError, UnicodeDecodeError):
            raise HookError(
                self.name, operation, "replied with something that is not JSON"
            ) from None


class HookStateStore:
    """A :class:`~search2o.state.store.StateStore` whose state lives in an enterprise hook.

    Args:
        hook: the implementation (:class:`HttpStateHook`, an entry point's object, ...).
        name: how errors name the hook (entry point name or URL without credentials).
        database: our database, to check that the conversation exists and is the caller's
            before asking the hook (``None``: leave ownership to the hook alone, as the
            conformance CLI does).
        timeout_s: run each call in a helper thread and give up after this many seconds
            (for Python hooks; an :class:`HttpStateHook` has its own timeout).

    ``save`` sends the whole new state: ``apply(base, changes)``, where ``base`` is the state
    passed in or, when omitted, restored from the hook (which must then still be at
    ``expected_version``). We store nothing of the state ourselves. A hook's
    :class:`ConflictError` and :class:`NotFoundError` pass through; any other exception, a
    timeout or a malformed reply becomes :class:`HookError`.
    """

    joins_transaction: ClassVar[bool] = False
    keeps_transcript: ClassVar[bool] = True

    def __init__(
        self,
        hook: StateHook,
        *,
        name: str,
        database: Database | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.hook = hook
        self.name = name
        self._db = database
        self._timeout = timeout_s

    def restore(
        self, conversation: str, user: Principal, *, session: Session | None = None
    ) -> tuple[ConversationState, int] | None:
        """Ask the hook for the state (after checking the conversation is ``user``'s).

        Raises:
            NotFoundError: missing or another user's conversation (our entry).
            HookError: the hook failed, timed out, or replied with malformed state.

        """
        self._check_owner(conversation, user, session)
        return self._restore(conversation, user)

    def save(
        self,
        conversation: str,
        user: Principal,
        changes: StateChanges,
        expected_version: int,
        *,
        session: Session | None = None,
        base: ConversationState | None = None,
    ) -> int:
        """Send ``apply(base, changes)`` to the hook with ``expected_version``.

        ``session`` is used only for the ownership check (the hook is outside our
        transaction: call this last, just before committing the run's other writes).

        Returns:
            The version the hook answered (checked to be greater than ``expected_version``).

        Raises:
            InputError: a value is not JSON or ``expected_version`` is bad; the hook is not
                called.
            ConflictError: the hook (or the restore before it) is at another version.
            NotFoundError: missing, deleted or another user's conversation.
            HookError: the hook failed, timed out or replied badly.

        """
        expected = check_expected_version(expected_version)
        changes.validate()
        self._check_owner(conversation, user, session)
        if base is None:
            restored = self._restore(conversation, user)
            if restored is None:
                if expected != 0:  # the state is gone (deleted) while this run held it
                    raise missing_conversation(conversation)
                base = ConversationState()
            elif restored[1] != expected:
                raise state_conflict(
                    conversation,
                    f"the hook holds version {restored[1]}, the run started from {expected}",
                )
            else:
                base = restored[0]
        payload = apply(base, changes).to_json()
        version = self._call(
            "save", lambda: self.hook.save(conversation, user.email, payload, expected)
        )
        if not isinstance(version, int) or isinstance(version, bool) or version <= expected:
            raise HookError(
                self.name,
                "save",
                f"returned version {version!r}; expected an integer greater than {expected}",
            )
        return version

    def delete(self, conversation: str, user: Principal, *, session: Session | None = None) -> None:
        """Ask the hook to delete the state for good.

        Raises:
            NotFoundError: missing or another user's conversation.
            HookError: the hook failed or timed out.

        """
        self._check_owner(conversation, user, session)
        self._call(
            "delete_conversation", lambda: self.hook.delete_conversation(conversation, user.email)
        )

    def close(self) -> None:
        """Close the hook if it has a ``close`` method (an HTTP client's connections)."""
        closer = getattr(self.hook, "close", None)
        if callable(closer):
            closer()

    def __enter__(self) -> HookStateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- helpers ------------------------------------------------------------------------

    def _check_owner(self, conversation: str, user: Principal, session: Session | None) -> None:
        if self._db is None:
            if not isinstance(conversation, str) or not _ID.fullmatch(conversation):
                raise missing_conversation(str(conversation))
            return
        with self._db.within(session) as s:
            conversation_owner(s, conversation, user)

    def _restore(self, conversation: str, user: Principal) -> tuple[ConversationState, int] | None:
        reply = self._call("restore", lambda: self.hook.restore(conversation, user.email))
        if reply is None:
            return None
        if not isinstance(reply, dict):
            raise HookError(self.name, "restore", f"returned {type(reply).__name__}, not an object")
        version = reply.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise HookError(
                self.name, "restore", f"returned version {version!r}; expected an integer >= 1"
            )
        if "state" not in reply:
            raise HookError(self.name, "restore", "returned no state")
        try:
            state = ConversationState.from_json(reply["state"])
        except InputError as exc:
            raise HookError(
                self.name, "restore", f"returned malformed state: {exc.message}"
            ) from None
        return state, version

    def _call(self, operation: str, call: Callable[[], T]) -> T:
        """Run one hook call: map its failures to :class:`HookError`, enforce the timeout."""
        if self._timeout is None:
            return self._guarded(operation, call)
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = self._guarded(operation, call)
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=run, name=f"search2o-state-hook-{operation}", daemon=True)
        worker.start()
        if not done.wait(self._timeout):
            # The call goes on in its daemon thread; we stop waiting and fail the run.
            raise HookError(self.name, operation, f"timed out after {self._timeout:g} s")
        if "error" in box:
            raise box["error"]
        value: T = box["value"]
        return value

    def _guarded(self, operation: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except (ConflictError, NotFoundError, HookError):
            raise
        except Exception as exc:
            raise HookError(self.name, operation, f"raised {type(exc).__name__}: {exc}") from exc


def load_state_hook(settings: StateSettings) -> tuple[StateHook, str, float | None]:
    """Build the hook named by ``settings.hooks``.

    Returns:
        ``(hook, name, timeout_s for a helper thread or None)``: an :class:`HttpStateHook`
        for an ``http(s)://`` URL, else the entry point's object — the loaded object itself
        when it already has ``save``, ``restore`` and ``delete_conversation``, otherwise the
        result of calling it with ``settings`` (a class or factory).

    Raises:
        ConfigError: hooks unset, no entry point of that name, a URL without a secret, a
            factory that fails, or an object lacking one of the three methods.

    """
    target = settings.hooks
    if not target:
        raise ConfigError("state.hooks is not set; there is no state hook to load")
    if target.startswith(("http://", "https://")):
        if settings.hook_secret is None:
            raise ConfigError(
                "state.hook_secret is required with an HTTP state hook "
                "(set SEARCH2O_STATE__HOOK_SECRET)"
            )
        hook = HttpStateHook(
            target, settings.hook_secret.get_secret_value(), settings.hook_timeout_s
        )
        return hook, hook.name, None
    loaded = load_factory(ENTRY_POINT_GROUP, target, "state.hooks (an http(s) URL or a plugin)")
    has_methods = all(callable(getattr(loaded, op, None)) for op in _OPERATIONS)
    if has_methods and not isinstance(loaded, type):
        obj = loaded
    else:
        try:
            obj = loaded(settings)
        except Exception as exc:
            raise ConfigError(
                f"state hook {target!r} could not be created with the state settings "
                f"({type(exc).__name__}: {exc})"
            ) from exc
    check_members(obj, _OPERATIONS, f"state hook {target!r}")
    hook_obj: StateHook = obj
    return hook_obj, target, settings.hook_timeout_s


def build_state_store(
    settings: Settings, database: Database, vault: Vault, validation: bool = False
) -> StateStore:
    """Return the state store the settings ask for.

    Args:
        settings: ``settings.state`` decides (:class:`~search2o.state.settings.StateSettings`).
        database: our database.
        vault: the conversation keys.
        validation: a store for validation runs, which always keep their state with us.

    Returns:
        A :class:`~search2o.state.store.DatabaseStateStore` when ``state.hooks`` is unset or
        ``validation`` is true, else a :class:`HookStateStore`. The caller closes it.

    Raises:
        ConfigError: see :func:`load_state_hook`.

    """
    state = settings.state
    if validation or not state.hooks:
        return DatabaseStateStore(database, vault, state.compact_every)
    hook, name, timeout_s = load_state_hook(state)
    return HookStateStore(hook, name=name, database=database, timeout_s=timeout_s)
