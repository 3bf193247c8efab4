"""The ``folder`` connector: a local or mounted directory kept in sync.

Every file under ``path`` whose type a loader reads (Markdown, text, HTML, PDF, DOCX) is a
document keyed by its path relative to the folder (``/`` separated). Its version is its
modification time (ns) and size, so an untouched file is never read again; a touched file
whose bytes are the same is stopped by the content hash. Hidden files and folders (a leading
``.``) are left out; a symlink is followed only to a file inside the folder, never to a folder
and never out of it. Access: the source's ``groups`` and ``users``, or everyone with ``public``;
with none of them only the admins read its documents. A folder that is missing or unreadable
fails the listing (nothing is deleted); a sub-folder that cannot be read makes the listing
incomplete (nothing is deleted either).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from search2o.accounts import normalize_email, normalize_groups
from search2o.connectors.contract import (
    AccessRule,
    Connector,
    Fetched,
    Listed,
    ListingEnd,
    SourceError,
)
from search2o.errors import InputError
from search2o.knowledge.loaders import SUPPORTED_SUFFIXES

__all__ = ["FolderConnector", "FolderSettings"]


class FolderSettings(BaseModel):
    """Settings of a ``folder`` source.

    Attributes:
        path: the folder, an absolute path.
        groups: groups whose members read its documents.
        users: emails of users who read its documents.
        public: every user reads its documents (instead of ``groups``/``users``).

    """

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="the folder, an absolute path", min_length=1, max_length=1000)
    groups: list[str] = Field(default_factory=list, max_length=100)
    users: list[str] = Field(default_factory=list, max_length=1000)
    public: bool = False

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if "\x00" in value or not os.path.isabs(value):
            raise ValueError(f"{value!r} must be an absolute path")
        return os.path.normpath(value)

    @field_validator("groups")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        try:
            return normalize_groups(value)
        except InputError as exc:
            raise ValueError(exc.reason) from None

    @field_validator("users")
    @classmethod
    def _users(cls, value: list[str]) -> list[str]:
        try:
            return sorted({normalize_email(user) for user in value})
        except InputError as exc:
            raise ValueError(exc.reason) from None


class FolderConnector(Connector):
    """Lists and reads the files of one folder (see the module docstring)."""

    kind = "folder"
    Settings = FolderSettings

    settings: FolderSettings

    @classmethod
    def check_new(cls, settings: BaseModel, rules: Any, remote: bool) -> None:
        """Refuse a folder that does not exist, or lies outside ``connectors.folder_roots``.

        Over the API (``remote``) a folder must lie under ``connectors.folder_roots``, and with
        none set the API adds no folder source: the server's files are the host's, and the
        host's own command line may name any folder.

        Raises:
            InputError: ``settings.path`` is not a folder, or not an allowed one.

        """
        assert isinstance(settings, FolderSettings)
        path = Path(settings.path)
        roots = [Path(root).resolve() for root in getattr(rules, "folder_roots", [])]
        if remote and not roots:
            raise InputError(
                "settings.path",
                "folder sources are added over the API only under connectors.folder_roots, "
                "which is not set (or add it with `search2o sources add folder` on the host)",
            )
        if not path.is_dir():
            raise InputError("settings.path", f"{settings.path} is not a folder")
        if roots and not any(path.resolve().is_relative_to(root) for root in roots):
            allowed = ", ".join(str(root) for root in roots)
            raise InputError(
                "settings.path",
                f"{settings.path} is outside connectors.folder_roots ({allowed})",
            )

    @property
    def root(self) -> Path:
        """The folder."""
        return Path(self.settings.path)

    def access(self) -> AccessRule:
        """Return the access rule of every document of this folder."""
        return AccessRule(
            users=tuple(self.settings.users),
            groups=tuple(self.settings.groups),
            everyone=self.settings.public,
        )

    def listing(self) -> Generator[Listed, None, ListingEnd]:
        """Yield each readable file with ``mtime_ns-size`` as its version.

        Raises:
            SourceError: the folder is missing or cannot be read.

        """
        root = self.root
        try:
            real_root = root.resolve(strict=True)
            top = sorted(os.scandir(root), key=lambda entry: entry.name)
        except OSError as exc:
            raise SourceError(f"folder {root} cannot be read: {exc.strerror or exc}") from exc
        if not root.is_dir():
            raise SourceError(f"{root} is not a folder")
        access = self.access()
        unreadable: list[str] = []
        stack = [(top, "")]
        while stack:
            entries, prefix = stack.pop()
            folders = []
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                key = f"{prefix}{entry.name}"
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append((Path(entry.path), f"{key}/"))
                        continue
                    if not entry.is_file(follow_symlinks=True):
                        continue
                    if Path(entry.name).suffix.lower() not in SUPPORTED_SUFFIXES:
                        continue
                    if entry.is_symlink() and not _inside(Path(entry.path), real_root):
                        continue
                    stat = entry.stat(follow_symlinks=True)
                except OSError:
                    unreadable.append(key)
                    continue
                yield Listed(key, f"{stat.st_mtime_ns}-{stat.st_size}", access)
            for folder, folder_key in reversed(folders):
                try:
                    children = sorted(os.scandir(folder), key=lambda entry: entry.name)
                except OSError:
                    unreadable.append(folder_key)
                    continue
                stack.append((children, folder_key))
        if unreadable:
            shown = ", ".join(unreadable[:5]) + (" ..." if len(unreadable) > 5 else "")
            return ListingEnd(False, f"{len(unreadable)} entries could not be read ({shown})")
        return ListingEnd(True)

    def fetch(self, key: str) -> Fetched:
        """Read one file.

        Raises:
            SourceError: it is gone, unreadable, or leads out of the folder.

        """
        path = self.root / key
        try:
            if not _inside(path, self.root.resolve(strict=True)):
                raise SourceError(f"{key} leads out of the folder")
            stat = path.stat()
            data = path.read_bytes()
        except OSError as exc:
            raise SourceError(f"{key} cannot be read: {exc.strerror or exc}") from exc
        return Fetched(
            key=key,
            version=f"{stat.st_mtime_ns}-{stat.st_size}",
            filename=path.name,
            data=data,
            access=self.access(),
            url=path.as_uri(),
        )


def _inside(path: Path, real_root: Path) -> bool:
    """Tell whether ``path``, symlinks resolved, lies inside ``real_root``."""
    try:
        return path.resolve(strict=True).is_relative_to(real_root)
    except OSError:
        return False
