"""A source's access rule mapped to a search2o access list: never wider than the source's.

Users map by email, groups by name (:class:`search2o.knowledge.access.AccessList`). A rule that
cannot be mapped (``unmapped``, or a name search2o cannot store) becomes readable by nobody,
never by everyone; a rule that names no one grants the admins only.
"""

from __future__ import annotations

from search2o.connectors.contract import AccessRule
from search2o.errors import InputError
from search2o.knowledge.access import AccessList

__all__ = ["map_access"]


def map_access(rule: AccessRule) -> tuple[AccessList, bool]:
    """Return the access list of ``rule`` and whether it could not be mapped.

    Returns:
        ``(access list, unmapped)``: ``unmapped`` is true when the document was made readable
        by nobody because its rule (or a name in it) has no search2o equivalent.

    """
    if rule.unmapped:
        return AccessList.nobody(), True
    if rule.everyone:
        return AccessList(), False
    if not rule.users and not rule.groups:
        return AccessList.admins_only(), False
    try:
        return AccessList.build(list(rule.groups), list(rule.users)), False
    except InputError:
        return AccessList.nobody(), True
