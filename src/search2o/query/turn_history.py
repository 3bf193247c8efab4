"""The first phase of a chat turn: open the conversation, read its history, compact it.

:class:`ConversationPhase` is a part of :class:`~search2o.query.turn.TurnEngine`: it stores
the conversation and the user's message before the model is called, reads the summary and
the messages after it, and folds older turns into a summary when the window needs room.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o.crypto.vault import Sealer, Vault
from search2o.providers.chat import (
    ChatMessage,
    ChatModel,
    Passage,
)
from search2o.query.conversations import (
    append_message,
    create_conversation,
    open_message,
    owned_conversation,
)
from search2o.query.settings import ChatSettings, RetentionSettings
from search2o.query.summary import extractive_summary
from search2o.query.turn_state import PreparedTurn, _History
from search2o.query.window import Window, WindowBudget, group_turns
from search2o.storage.db import Database
from search2o.storage.models import (
    Conversation,
    ConversationSummary,
    Message,
    utcnow,
)

__all__ = ["ConversationPhase"]


class ConversationPhase:
    """The turn engine's conversation phase (a base of :class:`~search2o.query.turn.TurnEngine`).

    Attributes:
        model: the chat model (it writes the summaries of older turns).
        budget: the token budget of the model's window.

    """

    _db: Database
    _vault: Vault
    _retention: RetentionSettings | None
    _settings: ChatSettings
    model: ChatModel
    budget: WindowBudget

    def _open(
        self,
        turn: PreparedTurn,
        title: str,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> tuple[Conversation, Message, _History, bool]:
        with self._db.session() as session:
            if turn.conversation_id is None:
                conversation, sealer = create_conversation(
                    session, self._vault, turn.principal, title
                )
                history = _History(conversation.id, sealer, title)
                created = True
            else:
                conversation = owned_conversation(
                    session, turn.principal, turn.conversation_id, self._retention
                )
                sealer = self._vault.sealer(session, conversation.id, conversation.user_id)
                history = self._read_history(session, sealer)
                history.title = sealer.open("title", conversation.title_sealed)
                created = False
            user_message = append_message(
                session,
                conversation,
                sealer,
                role="user",
                text=turn.message,
                agent=turn.agent,
                page=turn.page.stored() if turn.page is not None else None,
            )
            if on_stored is not None:
                on_stored(session, conversation.id, "user")
            session.expunge_all()
        return conversation, user_message, history, created

    def _read_history(self, session: Session, sealer: Sealer) -> _History:
        """Read the summary and the messages after it (summaries on) or the last N (off).

        Messages without text (an answer that failed before its first word) are skipped.
        """
        conversation_id = sealer.conversation_id
        history = _History(conversation_id, sealer)
        query = select(Message).where(
            Message.conversation_id == conversation_id,
            Message.role.in_(("user", "assistant")),
        )
        if self._settings.summaries:
            summary = session.get(ConversationSummary, conversation_id)
            if summary is not None:
                history.summary = sealer.open("summary", summary.sealed)
                history.through_seq = summary.through_seq
                query = query.where(Message.seq > summary.through_seq)
            rows = list(session.scalars(query.order_by(Message.seq)))
        else:
            limit = self._settings.history_messages
            rows = (
                list(session.scalars(query.order_by(Message.seq.desc()).limit(limit)))[::-1]
                if limit
                else []
            )
        for row in rows:
            text, _ = open_message(sealer, row)
            if text:
                history.messages.append(ChatMessage(row.role, text))  # type: ignore[arg-type]
                history.seqs.append(row.seq)
        return history

    async def _compact(
        self,
        history: _History,
        system: str,
        message: str,
        trace: dict[str, Any],
        sources: list[Passage],
    ) -> Window:
        """Fold the oldest turns into the summary when the history no longer fits the window.

        Keeps the newest half of the turns that fit, so compaction runs every so many turns,
        not on every turn. The summary is written by the model when it can (``summarize``),
        else extractively; it is stored at once, so a failed answer does not lose it.

        Returns:
            The window of the first model call, built once more only after a compaction.

        """
        window = self.budget.build(
            system, history.messages, message, summary=history.summary, sources=sources
        )
        if not self._settings.summaries or window.trace["history_turns_dropped"] == 0:
            return window
        turns = group_turns(history.messages)
        keep = max(1, window.trace["history_turns_packed"] // 2)
        folded = [index for turn in turns[:-keep] for index in turn]
        if not folded:
            return window
        max_tokens = int(self.budget.cap * self._settings.summary_share)
        started = time.perf_counter()
        writer = (
            getattr(self.model, "summarize", None)
            if self._settings.summary_writer == "model"
            else None
        )
        previous, messages = history.summary, [history.messages[i] for i in folded]
        summary = (
            await writer(previous, messages, max_tokens)
            if callable(writer)
            else extractive_summary(previous, messages, max_tokens * 3)
        )
        through = history.seqs[folded[-1]]
        await asyncio.to_thread(self._store_summary, history.sealer, summary, through)
        kept = len(folded)
        history.summary, history.through_seq = summary, through
        history.messages, history.seqs = history.messages[kept:], history.seqs[kept:]
        trace["summary"] = {
            "folded_messages": kept,
            "through_seq": through,
            "chars": len(summary),
            "ms": round((time.perf_counter() - started) * 1000, 2),
        }
        return self.budget.build(
            system, history.messages, message, summary=history.summary, sources=sources
        )

    def _store_summary(self, sealer: Sealer, summary: str, through: int) -> None:
        sealed = sealer.seal("summary", summary)
        with self._db.session() as session:
            if session.get(Conversation, sealer.conversation_id) is None:
                return  # deleted meanwhile: stays deleted
            row = session.get(ConversationSummary, sealer.conversation_id)
            if row is None:
                session.add(
                    ConversationSummary(
                        conversation_id=sealer.conversation_id, sealed=sealed, through_seq=through
                    )
                )
            else:
                row.sealed, row.through_seq, row.updated_at = sealed, through, utcnow()
