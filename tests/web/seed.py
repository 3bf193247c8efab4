"""Many conversations for one user, written straight to the store (titles sealed as usual).

Used by the 10,000-conversation sidebar test and ``bench/web.py``. Each conversation gets its
own data key and sealed title, as a turn would give it; their last use is spread over
``days`` so every date group of the sidebar has members; ``pinned`` of them are pinned.
"""

from __future__ import annotations

from datetime import timedelta

from search2o.accounts import Principal
from search2o.query.conversations import create_conversation
from search2o.runtime import Runtime
from search2o.storage.models import utcnow


def title_of(index: int) -> str:
    """The title of seeded conversation ``index`` (unique words, so a search finds one)."""
    return f"Seeded question {index} about topic {index % 97}"


def seed_conversations(
    runtime: Runtime, principal: Principal, count: int, days: int = 60, pinned: int = 3
) -> list[str]:
    """Create ``count`` conversations of ``principal``; return their ids, newest first."""
    now = utcnow()
    ids: list[str] = []
    with runtime.database.session() as session:
        for index in range(count):
            conversation, _ = create_conversation(
                session, runtime.vault, principal, title_of(index)
            )
            conversation.message_count = 2
            conversation.pinned = index < pinned
            conversation.created_at = conversation.last_used_at = now - timedelta(
                seconds=index * days * 86_400 / max(count, 1)
            )
            ids.append(conversation.id)
            if index % 1000 == 999:
                session.flush()
    return ids
