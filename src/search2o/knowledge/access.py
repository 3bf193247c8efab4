"""Access rights: who may read which document.

A document's access list holds ``group:<name>`` and ``user:<email>`` entries; an empty list
means everyone. Every search builds :func:`readable_filter` into its SQL, so rows a caller may
not read are excluded before ranking, never after.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, exists, or_, select
from sqlalchemy.orm import Session

from search2o.accounts import Principal, normalize_email, normalize_groups
from search2o.storage.models import Document, DocumentAccess

__all__ = ["AccessList", "readable_documents", "readable_filter"]


@dataclass(frozen=True)
class AccessList:
    """Who may read a document: members of any of ``groups`` or any of ``users``; empty = all.

    Construct with :meth:`build` to validate names.
    """

    groups: tuple[str, ...] = ()
    users: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        groups: list[str] | tuple[str, ...] = (),
        users: list[str] | tuple[str, ...] = (),
        *,
        fields: tuple[str, str] = ("group", "user"),
    ) -> AccessList:
        """Validate and normalise the names.

        Args:
            fields: the caller's names of the two inputs, used in errors (CLI ``group``/``user``,
                API ``groups``/``users``).

        Raises:
            InputError: a group name or an email is malformed (field named by ``fields``).
        """
        return cls(
            tuple(normalize_groups(groups, fields[0])),
            tuple(sorted({normalize_email(u, fields[1]) for u in users})),
        )

    @property
    def is_public(self) -> bool:
        """True when the list is empty: everyone may read."""
        return not self.groups and not self.users

    def entries(self) -> set[str]:
        """Return the stored form: ``{"group:hr", "user:ann@example.com"}``."""
        return {f"group:{g}" for g in self.groups} | {f"user:{u}" for u in self.users}


def readable_documents(principal: Principal) -> Select[int]:
    """Return a SELECT of the ids of documents ``principal`` may read."""
    granted = select(DocumentAccess.document_id).where(
        DocumentAccess.principal.in_(principal.access_keys())
    )
    return select(Document.id).where(or_(Document.is_public, Document.id.in_(granted)))


def readable_filter(session: Session, principal: Principal) -> Select[int] | None:
    """Return :func:`readable_documents`, or ``None`` when no document is restricted at all.

    With ``None`` the searches skip the filter, which is the common single-team case.
    """
    restricted = session.scalar(select(exists().where(Document.is_public.is_(False))))
    return readable_documents(principal) if restricted else None
