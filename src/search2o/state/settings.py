"""The ``state`` settings section: where agents' conversation state is kept (docs/state.md)."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    model_validator,
)

from search2o.netpolicy import url_problem

__all__ = ["StateSettings"]


class StateSettings(BaseModel):
    """Where the Agent Engine keeps conversation state (:mod:`search2o.state`).

    ``hooks`` unset: our encrypted store in the database. An ``http://`` or ``https://`` URL:
    the enterprise's hook service, called ``POST {hooks}/save``, ``/restore`` and ``/delete``
    with requests signed by ``hook_secret`` (HMAC-SHA256, :mod:`search2o.signing`). Any other
    value: the name of an entry point in the group ``search2o.state_hooks``. With hooks set we
    keep only the conversation's entry; validation runs always keep their state with us.
    ``compact_every``: fold the appended changes of a conversation into one sealed snapshot
    in the background once more than this many are pending (0 = only when asked).
    """

    model_config = ConfigDict(extra="forbid")

    hooks: str | None = Field(
        default=None, description="None, an entry point in search2o.state_hooks, or a URL"
    )
    hook_secret: SecretStr | None = Field(default=None, description="HTTP hooks: signing key")
    hook_timeout_s: float = Field(default=10.0, gt=0, le=300, description="per hook call")
    compact_every: int = Field(default=64, ge=0, le=100_000, description="pending changes")

    @model_validator(mode="after")
    def _secret_for_http(self) -> StateSettings:
        if self.hooks is not None and not self.hooks.strip():
            raise ValueError("state.hooks must not be empty (leave it unset for our own store)")
        is_url = bool(self.hooks) and str(self.hooks).startswith(("http://", "https://"))
        if not is_url:
            return self
        secret = self.hook_secret.get_secret_value() if self.hook_secret else ""
        if len(secret) < 16:
            raise ValueError(
                "state.hook_secret must be at least 16 characters with an HTTP state hook "
                "(set SEARCH2O_STATE__HOOK_SECRET)"
            )
        problem = url_problem(str(self.hooks), secure=True)
        if problem is not None:
            raise ValueError(f"state.hooks: {problem} (the state travels in plain form)")
        return self
