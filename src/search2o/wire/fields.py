"""Field rules every wire model shares: user text, and the bound of an id or offset."""

from __future__ import annotations

from typing import Any

from pydantic import Field

__all__ = ["INT32_MAX", "TEXT_PATTERN", "text_field"]

INT32_MAX = 2_147_483_647
"""The largest id or offset a query may carry (PostgreSQL ``integer``; also SQLite's bound)."""

TEXT_PATTERN = r"^[^\u0000]*\S[^\u0000]*$"
"""Text that is not blank and holds no NUL (ECMA-262 syntax, as JSON Schema's ``pattern``)."""


def text_field(description: str, **kwargs: Any) -> Any:
    """Return a ``Field`` for user text, documented as non-blank without NUL.

    The rule is enforced by :func:`search2o.textrules.check_text` where the text is used, whose
    errors name the field and the rule; the pattern only documents it.
    """
    return Field(description=description, json_schema_extra={"pattern": TEXT_PATTERN}, **kwargs)
