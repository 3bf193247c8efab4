"""Access rights: who may read which document.

A document's access list holds ``group:<name>``, ``user:<email>`` and ``role:<role>``
entries; an empty list means everyone. ``role:admin`` grants the admins (a synced source with no
access rule of its own); ``role:nobody`` grants no one (a source's rule that could not be mapped
to users and groups: readable by nobody, never by everyone). Every search builds
:func:`readable_filter` into its SQL, so rows a caller may not read are excluded before
ranking, never after.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, exists, or_, select
from sqlalchemy.orm import Session

from search2o.accounts import Principal, normalize_email, normalize_groups
from search2o.storage.models import Document, DocumentAccess

__all__ = ["ADMINS", "NOBODY", "AccessList", "readable_documents", "readable_filter"]


ADMINS = "admin"
"""The role of the admins (``Principal.is_admin``)."""
NOBODY = "nobody"
"""A role no one has: a document under it alone is readable by no one."""


@dataclass(frozen=True)
class AccessList:
    """Who may read a document: members of ``groups``, ``users`` or ``roles``; empty = all.

    Construct with :meth:`build` to validate names, or :meth:`admins_only` / :meth:`nobody`.
    """

    groups: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    @classmethod
    def admins_only(cls) -> AccessList:
        """Return the list that grants the admins only."""
        return cls(roles=(ADMINS,))

    @classmethod
    def nobody(cls) -> AccessList:
        """Return the list that grants no one (never the same as everyone)."""
        return cls(roles=(NOBODY,))

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
        return not self.groups and not self.users and not self.roles

    def entries(self) -> set[str]:
        """Return the stored form: ``{"group:hr", "user:ann@example.com", "role:admin"}``."""
        return (
            {f"group:{g}" for g in self.groups}
            | {f"user:{u}" for u in self.users}
            | {f"role:{r}" for r in self.roles}
        )


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
