"""Hostile documents built in the tests themselves, and a child process that measures loading.

The builders write real files of each format: a DOCX whose ``document.xml`` is far larger
than its ZIP entry, PDFs whose pages carry large FlateDecode content streams (or invoke one
form XObject thousands of times), HTML that is huge, deeply nested or all entities.

:func:`measure_load` reads a file in a fresh interpreter and reports the growth of its peak
resident set size over the load alone: after the parsers were imported and the file read, the
peak is reset to the current size (writing ``5`` to ``/proc/self/clear_refs``) and read back
afterwards as ``VmHWM`` (Linux proc(5)). ``getrusage``'s ``ru_maxrss`` would not do: Linux
carries it over from the parent across ``exec``, so a child of a large test process would
start with the parent's peak and report no growth at all.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

WORD_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_DOCX_HEAD = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<w:document xmlns:w="' + WORD_NS.encode() + b'"><w:body>'
)
_DOCX_TAIL = b"</w:body></w:document>"


def words(count: int, seed: int = 7) -> list[str]:
    """``count`` pseudo-random lower-case words (deterministic), which compress poorly."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(count)]


def paragraph_xml(text: str) -> bytes:
    """One WordprocessingML paragraph holding ``text``."""
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>".encode()


def docx_with(
    body: bytes | list[bytes],
    *,
    extra: dict[str, bytes] | None = None,
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    """A DOCX made by python-docx whose ``word/document.xml`` body is replaced.

    ``body`` is the XML inside ``<w:body>`` (a list is written piece by piece, so a body of
    100 MiB never needs to be one bytes object); ``extra`` adds ZIP entries by name.
    """
    import docx

    buffer = io.BytesIO()
    docx.Document().save(buffer)
    source = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                archive.writestr(info, source.read(info.filename))
                continue
            entry = zipfile.ZipInfo("word/document.xml")
            entry.compress_type = compression
            with archive.open(entry, "w") as handle:
                handle.write(_DOCX_HEAD)
                for piece in [body] if isinstance(body, bytes) else body:
                    handle.write(piece)
                handle.write(_DOCX_TAIL)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return out.getvalue()


def docx_bomb(xml_bytes: int) -> bytes:
    """A DOCX whose ``document.xml`` is ``xml_bytes`` of one paragraph repeated.

    Deflate reaches ratios of about 270:1 on it: 100 MiB of XML become about 390 KB.
    """
    para = paragraph_xml("All work and no play makes a dull document.")
    block = para * 10_000
    count = xml_bytes // len(para)
    pieces = [block] * (count // 10_000) + [para * (count % 10_000)]
    return docx_with(pieces)


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"({escaped})".encode("latin-1")


def _stream(content: bytes, extra: bytes = b"", *, flate: bool = True) -> bytes:
    data = zlib.compress(content, 9) if flate else content
    flt = b" /Filter /FlateDecode" if flate else b""
    return b"<< /Length %d%s%s >>\nstream\n%s\nendstream" % (len(data), flt, extra, data)


def pdf_document(
    contents: list[bytes],
    *,
    info: bytes | None = None,
    forms: dict[str, bytes] | None = None,
) -> bytes:
    """A PDF with one page per content stream (FlateDecode), Helvetica as ``/F1``.

    ``info`` is the body of the document information dictionary (e.g. ``b"/Title (x)"``);
    ``forms`` maps names to the content of form XObjects every page may invoke (``/X1 Do``).
    """
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    font_resources = b"/Font << /F1 3 0 R >>"
    xobjects = b""
    for name, content in (forms or {}).items():
        objects.append(
            _stream(
                content,
                b" /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << "
                + font_resources
                + b" >>",
            )
        )
        xobjects += b"/%s %d 0 R " % (name.encode(), len(objects))
    resources = font_resources + (b" /XObject << " + xobjects + b">>" if xobjects else b"")
    kids = []
    for content in contents:
        objects.append(_stream(content))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
            + resources
            + b" >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids),
        len(kids),
    )
    info_ref = b""
    if info is not None:
        objects.append(b"<< " + info + b" >>")
        info_ref = b" /Info %d 0 R" % len(objects)
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\n" % (len(objects) + 1, info_ref)
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def text_page(lines: list[str]) -> bytes:
    """A content stream that shows each of ``lines`` on its own line."""
    shown = b"\n".join(_pdf_string(line) + b" Tj T*" for line in lines)
    return b"BT /F1 12 Tf 14 TL 72 720 Td\n" + shown + b"\nET"


def pdf_bomb(pages: int, stream_bytes: int) -> bytes:
    """``pages`` pages, each its own content stream of ``stream_bytes`` text operators.

    100 pages of 1 MiB are about 390 KB on disk.
    """
    line = _pdf_string("All work and no play makes a dull page.") + b" Tj T*\n"
    content = b"BT /F1 12 Tf 14 TL 72 720 Td\n" + line * (stream_bytes // len(line)) + b"ET"
    return pdf_document([content] * pages)


def pdf_form_loop(invocations: int, form_ops: int) -> bytes:
    """One page invoking a form XObject ``invocations`` times; the form shows empty strings.

    Small on disk, but a text extractor interprets ``invocations * form_ops`` operators.
    """
    form = b"BT /F1 12 Tf\n" + b"() Tj\n" * form_ops + b"ET"
    page = b"/X1 Do\n" * invocations
    return pdf_document([page], forms={"X1": form})


_MEASURE = r"""
import json, sys, time
from search2o.config import KnowledgeSettings
from search2o.errors import InputError
from search2o.knowledge.loaders import load_document
import docx, lxml.etree, pypdf  # imported before the baseline: their import is not the load

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)

path, overrides = sys.argv[1], json.loads(sys.argv[2])
data = open(path, "rb").read()
extra = (KnowledgeSettings(**overrides),) if overrides else ()
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")  # reset the peak (VmHWM) to the current resident set (proc(5))
base = kib("VmRSS")
started, cpu = time.perf_counter(), time.process_time()
try:
    doc = load_document(path, data, *extra)
    result = {"status": "loaded", "chars": sum(len(s.text) for s in doc.sections)}
except InputError as exc:
    result = {"status": "refused", "reason": exc.reason}
result["seconds"] = time.perf_counter() - started
result["cpu_seconds"] = time.process_time() - cpu
peak = kib("VmHWM")
result["rss_growth_mb"] = (peak - base) / 1024
result["baseline_rss_mb"], result["peak_rss_mb"] = base / 1024, peak / 1024
print(json.dumps(result))
"""


def measure_load(path: Path, timeout_s: float = 120.0, **overrides: Any) -> dict[str, Any]:
    """Load ``path`` with ``KnowledgeSettings(**overrides)`` in a child interpreter.

    Returns ``{"status": "loaded" | "refused", "reason"?, "chars"?, "seconds", "cpu_seconds",
    "rss_growth_mb", "baseline_rss_mb", "peak_rss_mb"}``; a child that runs past
    ``timeout_s`` or dies fails the test. Bounds are checked on ``cpu_seconds`` (the child's
    own CPU time): wall time also counts the waits for a core that other processes hold.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), json.dumps(overrides)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
