"""The data folder is its owner's alone: created mode 0700, and a warning for an open one.

The SQLite file, its WAL, the keyring and uploads live in the data folder; other local users
must not even list it. A folder search2o creates gets mode 0700 (missing parents get the usual
mode: they are not ours). A folder that already exists is the operator's: its mode is never
changed behind their back, but a folder that group or others may enter or read is reported
once per process, with the command that fixes it.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

__all__ = ["ensure_private_dir"]

log = logging.getLogger(__name__)

_warned: set[Path] = set()  # one warning per folder and process, not one per file in it


def ensure_private_dir(folder: Path) -> None:
    """Create ``folder`` owner-only (0700), or warn once if it exists open to others.

    Args:
        folder: the data folder, or the folder of the keyring or the SQLite file.

    Raises:
        OSError: the folder cannot be created (the caller names the setting to change).

    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
        return
    except FileExistsError:  # the operator's folder (or a file, which cannot be one)
        if not folder.is_dir():
            raise
    mode = stat.S_IMODE(folder.stat().st_mode)
    resolved = folder.resolve()
    if mode & 0o077 and resolved not in _warned:
        _warned.add(resolved)
        log.warning(
            f"the data folder {folder} has mode {mode:o}: other local users may read what is "
            f"in it; make it private with `chmod 700 {folder}`",
            extra={"fields": {"folder": str(folder), "mode": f"{mode:o}"}},
        )
