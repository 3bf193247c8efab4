"""CLI commands for key-encryption keys: ``keys status``, ``keys rotate``, ``keys retire``.

Rotation never decrypts content: it adds a KEK version (where the provider can) and re-wraps
every conversation's data key under the current version. Retiring refuses while any data key
is still wrapped by that version, so a retire can never make a conversation unreadable.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from search2o.cli.common import INT32_MAX, console, handle_errors, open_runtime, print_json
from search2o.crypto.keys import KeyProvider
from search2o.crypto.vault import RewrapReport, Vault
from search2o.errors import (
    ConfigError,
    ConflictError,
    InputError,
    IntegrityCheckError,
    KeyUnavailableError,
)

__all__ = ["keys_app"]

keys_app = typer.Typer(
    help="Key-encryption keys: status, rotation and retirement.", no_args_is_help=True
)

_JSON = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@keys_app.command("status")
@handle_errors
def keys_status(as_json: _JSON = False) -> None:
    """Show the provider, its KEK versions and how many data keys each version wraps."""
    with open_runtime() as runtime:
        provider, in_use = runtime.key_provider, runtime.vault.versions_in_use()
        versions = provider.versions()
        key_id = provider.key_id
        name = runtime.settings.keys.provider
    counts = {v.version: in_use.get((key_id, v.version), 0) for v in versions}
    others = sorted(
        (k, n, count) for (k, n), count in in_use.items() if k != key_id or n not in counts
    )
    if as_json:
        rows = [
            {
                "version": v.version,
                "current": v.current,
                "usable": v.usable,
                "created_at": v.created_at.isoformat() if v.created_at else None,
                "data_keys": counts[v.version],
            }
            for v in versions
        ]
        unknown = [{"key_id": k, "version": n, "data_keys": c} for k, n, c in others]
        report = {"provider": name, "key_id": key_id, "versions": rows, "unknown": unknown}
        print_json(report)
        return
    console.print(f"provider: {name}   key id: {key_id}")
    table = Table()
    for column in ("version", "current", "usable", "created", "data keys"):
        table.add_column(column)
    for v in versions:
        table.add_row(
            str(v.version),
            "yes" if v.current else "",
            "yes" if v.usable else "retired",
            f"{v.created_at:%Y-%m-%d %H:%M}" if v.created_at else "",
            str(counts[v.version]),
        )
    console.print(table)
    for k, n, c in others:
        console.print(
            f"warning: {c} data keys are wrapped by KEK {k} v{n}, which this provider does "
            "not hold: configure the provider they were written with"
        )


@keys_app.command("rotate")
@handle_errors
def keys_rotate(
    rewrap_only: Annotated[
        bool,
        typer.Option(
            "--rewrap-only", help="Add no version; re-wrap every data key to the current one."
        ),
    ] = False,
    as_json: _JSON = False,
) -> None:
    """Add a KEK version and re-wrap every data key under it (content is not decrypted)."""
    with open_runtime() as runtime:
        provider = runtime.key_provider
        added, note = None, None
        if not rewrap_only:
            try:
                added = provider.add_version()
            except ConfigError as exc:
                note = f"{exc.message}; re-wrapping to the current version only"
        report = _rewrap(runtime.vault, added)
        key_id = provider.key_id
    if as_json:
        out: dict[str, Any] = {"key_id": key_id, "added_version": added, "note": note}
        out.update(version=report.version, rewrapped=report.rewrapped, unchanged=report.unchanged)
        print_json(out)
        return
    if note:
        console.print(f"note: {note}")
    if added is not None:
        console.print(f"added version {added} of KEK {key_id}")
    console.print(
        f"re-wrapped {report.rewrapped} data keys to version {report.version} "
        f"({report.unchanged} already on it)"
    )


@keys_app.command("retire")
@handle_errors
def keys_retire(
    version: Annotated[
        int, typer.Argument(min=1, max=INT32_MAX, help="The KEK version to retire.")
    ],
    as_json: _JSON = False,
) -> None:
    """Retire a KEK version for good; refused while any data key is still wrapped by it."""
    with open_runtime() as runtime:
        provider = runtime.key_provider
        key_id = provider.key_id
        in_use = runtime.vault.versions_in_use().get((key_id, version), 0)
        if in_use:
            raise ConflictError(
                f"KEK {key_id} version {version} still wraps {in_use} data keys: run "
                "`search2o keys rotate` first (it re-wraps them to the current version)"
            )
        _check_known(provider, version)
        provider.retire(version)
        kept = any(v.version == version and v.usable for v in provider.versions())
    if as_json:
        print_json({"key_id": key_id, "retired": version, "still_held": kept}, indent=None)
        return
    if kept:
        console.print(
            f"no data key uses version {version} of KEK {key_id} any more; this provider "
            "keeps its keys elsewhere: remove that version there now"
        )
    else:
        console.print(f"retired version {version} of KEK {key_id}")


def _rewrap(vault: Vault, added: int | None) -> RewrapReport:
    """Re-wrap; on failure after a version was added, say how to finish."""
    try:
        return vault.rewrap_all()
    except (KeyUnavailableError, IntegrityCheckError) as exc:
        if added is None:
            raise
        hint = f"version {added} was added: fix this, then `search2o keys rotate --rewrap-only`"
        raise type(exc)(f"{exc.message}; {hint}") from exc


def _check_known(provider: KeyProvider, version: int) -> None:
    numbers = [v.version for v in provider.versions()]
    if version not in numbers:
        listed = ", ".join(map(str, numbers))
        raise InputError("VERSION", f"KEK {provider.key_id} has no version {version} ({listed})")
