"""Retention: conversations expire a number of days after their last use, by the owner's plan.

A conversation's last use is the later of its last turn (or agent run) and its last read
(``GET /v1/conversations/{id}``, opening it in a client): both set ``last_used_at``. With
``retention.days = {"free": 7, "paid": null}`` (the defaults), a free user's unpinned
conversation expires 7 days after its last use; a paid user's never does; pinned conversations
never expire; a plan missing from ``days`` is treated as ``free``. Expired conversations are
filtered out at read time on every path (:func:`search2o.query.conversations.live`), so the
sweeper only reclaims space: :func:`sweep` deletes them with everything under them, including
their data key. It runs inside the server every ``retention.sweep_interval_s`` and as
``search2o retention sweep``. Expiry never calls an enterprise hook's ``delete_conversation``
(only a user's delete does).

The same sweep deletes ended browser sessions and spent sign-in grants
(:func:`search2o.signin.purge_ended`): they are refused at read time too, so this also only
reclaims space, and it rides on the one periodic job the queue runs once across processes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select

from search2o.crypto.vault import Vault
from search2o.query.conversations import delete_conversations
from search2o.query.settings import RetentionSettings
from search2o.signin import purge_ended
from search2o.storage.db import Database
from search2o.storage.models import Conversation, User, utcnow

__all__ = ["SweepReport", "sweep"]

log = logging.getLogger("search2o.retention")
_BATCH = 500


@dataclass(frozen=True)
class SweepReport:
    """What one sweep deleted.

    Conversations in total and per plan, ended browser sessions, spent sign-in grants (links
    and OIDC requests).
    """

    deleted: int
    by_plan: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    grants: int = 0


def sweep(
    database: Database, vault: Vault, retention: RetentionSettings, now: datetime | None = None
) -> SweepReport:
    """Delete every expired conversation, then ended browser sessions and spent grants.

    Conversations go in batches of 500, one transaction each; sessions and sign-in grants
    (:func:`search2o.signin.purge_ended`) in one transaction after them.

    Args:
        now: the sweep's instant (default: the current time), e.g. to test expiry.

    Raises:
        StorageError: the database failed (batches already committed stay deleted).

    """
    instant = now or utcnow()
    limited = {plan: days for plan, days in retention.days.items() if days is not None}
    by_plan: dict[str, int] = {}
    for plan, days in limited.items():
        cutoff = instant - timedelta(days=days)
        owners = select(User.id).where(
            User.plan == plan
            if plan != "free"
            else User.plan.not_in([p for p in retention.days if p != "free"])
        )
        while True:
            with database.session() as session:
                ids = list(
                    session.scalars(
                        select(Conversation.id)
                        .where(
                            Conversation.user_id.in_(owners),
                            Conversation.pinned.is_(False),
                            Conversation.last_used_at < cutoff,
                        )
                        .limit(_BATCH)
                    )
                )
                deleted = delete_conversations(session, ids)
            for conversation_id in ids:
                vault.forget(conversation_id)
            by_plan[plan] = by_plan.get(plan, 0) + deleted
            if len(ids) < _BATCH:
                break
    with database.session() as session:
        sessions, grants = purge_ended(session, instant)
    return SweepReport(sum(by_plan.values()), by_plan, sessions, grants)
