"""Files uploaded through the API, waiting for the job that ingests them (migration 0013).

``POST /v1/documents`` stores each file here and enqueues one ``documents.ingest`` job that
names the upload: any worker on any host reads the bytes from the database, not from the disk
of the API process that received them. The rows are deleted when the job has ingested them,
and by the ``uploads.clean`` job a day after an upload whose job never finished.

* ``upload_parts``: one row per file of an upload: its position, the name the client sent, the
  document identity (``upload:<path>``) and the bytes.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, utcnow

__all__ = ["UploadPart"]


class UploadPart(Base):
    """One uploaded file of one upload (``upload_id``, a random 32-hex id)."""

    __tablename__ = "upload_parts"
    __table_args__ = (Index("ix_upload_parts_created_at", "created_at"),)

    upload_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    filename: Mapped[str] = mapped_column(String(2000))
    source: Mapped[str] = mapped_column(String(2000))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
