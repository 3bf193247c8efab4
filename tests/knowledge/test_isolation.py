"""Large PDF/DOCX files are parsed in a child interpreter: same result, same refusals, bounded.

The loaders used to crash, hang or flood memory on purpose are defined here at module level,
so the child resolves them on the parent's import path like the real ones.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from search2o.errors import CorruptFileError, InputError
from search2o.knowledge import isolation
from search2o.knowledge.isolation import parse_in_child
from search2o.knowledge.loaders import ISOLATED_SUFFIXES, load_document
from search2o.knowledge.sections import LoadedDocument, Section
from search2o.knowledge.settings import KnowledgeSettings
from tests.knowledge.hostile import docx_bomb, docx_with, measure_load, paragraph_xml, words

IN_PROCESS = KnowledgeSettings(isolated_parse_bytes=1 << 40)
IN_CHILD = KnowledgeSettings(isolated_parse_bytes=0)


def _document(text: str) -> LoadedDocument:
    return LoadedDocument(title="t", media_type="text/plain", sections=(Section((), text),))


def report_pid(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """A loader that answers with the id of the process it ran in."""
    return _document(str(os.getpid()))


def flood_memory(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """A loader that needs 8 GiB at once."""
    hog = bytearray(8 << 30)
    return _document(str(len(hog)))


def die_by_signal(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """A loader whose process is killed (a crash in a C parser looks the same)."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def hang(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """A loader stuck off the CPU."""
    time.sleep(120)
    raise AssertionError("unreachable")


def fail_oddly(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """A loader that fails with an error no loader should raise."""
    raise KeyError("xref")


def note_interval(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """A loader that sleeps 0.6 s and writes when it started and ended to the file ``data``."""
    started = time.time()
    time.sleep(0.6)
    Path(data.decode()).write_text(json.dumps([started, time.time()]))
    return _document("slept")


def _docx(paragraphs: int) -> bytes:
    text = words(paragraphs * 12)
    return docx_with(
        b"".join(paragraph_xml(" ".join(text[i : i + 12])) for i in range(0, len(text), 12))
    )


def test_only_pdf_and_docx_are_parsed_in_a_child() -> None:
    assert {".pdf", ".docx"} == ISOLATED_SUFFIXES
    assert KnowledgeSettings().isolated_parse_bytes == 1024 * 1024


def test_a_docx_parsed_in_a_child_equals_the_one_parsed_here() -> None:
    data = _docx(400)
    assert load_document("report.docx", data, IN_CHILD) == load_document(
        "report.docx", data, IN_PROCESS
    )


def test_the_child_is_another_process() -> None:
    pid = parse_in_child(report_pid, "a.pdf", b"x", IN_CHILD).sections[0].text
    assert int(pid) != os.getpid()


@pytest.mark.parametrize(
    ("name", "data", "cls", "needle"),
    [
        ("broken.docx", b"PK\x03\x04 not a zip at all", CorruptFileError, ""),
        ("broken.pdf", b"%PDF-1.7 garbage", CorruptFileError, ""),
        ("bomb.docx", docx_bomb(4 * 1024 * 1024), InputError, "knowledge.max_compression_ratio"),
    ],
)
def test_a_refusal_in_the_child_keeps_its_class_field_and_reason(
    name: str, data: bytes, cls: type[InputError], needle: str
) -> None:
    with pytest.raises(cls) as here:
        load_document(name, data, IN_PROCESS)
    with pytest.raises(cls) as there:
        load_document(name, data, IN_CHILD)
    assert type(there.value) is type(here.value)
    assert (there.value.field, there.value.reason) == (here.value.field, here.value.reason)
    assert needle in there.value.reason


def test_a_document_over_the_memory_bound_is_refused_naming_the_setting() -> None:
    settings = KnowledgeSettings(isolated_parse_bytes=0, parse_memory_mb=512)
    with pytest.raises(InputError) as refused:
        parse_in_child(flood_memory, "huge.docx", b"x", settings)
    assert refused.value.field == "huge.docx"
    assert "512 MB" in refused.value.reason and "knowledge.parse_memory_mb" in refused.value.reason


def test_a_parser_killed_by_a_signal_is_a_corrupt_file() -> None:
    with pytest.raises(CorruptFileError) as refused:
        parse_in_child(die_by_signal, "crash.pdf", b"x", IN_CHILD)
    assert refused.value.field == "crash.pdf"
    assert "SIGKILL" in refused.value.reason


def test_an_unexpected_parser_error_is_a_corrupt_file_not_a_crash() -> None:
    with pytest.raises(CorruptFileError) as refused:
        parse_in_child(fail_oddly, "odd.pdf", b"x", IN_CHILD)
    assert refused.value.field == "odd.pdf" and "xref" in refused.value.reason


def test_a_parser_stuck_past_the_wall_bound_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "_STARTUP_S", 1.5)
    settings = KnowledgeSettings(isolated_parse_bytes=0, max_extract_seconds=0.25)
    started = time.monotonic()
    with pytest.raises(InputError) as refused:
        parse_in_child(hang, "stuck.pdf", b"x", settings)
    assert time.monotonic() - started < 30
    assert "knowledge.max_extract_seconds" in refused.value.reason
    assert "2 seconds" in refused.value.reason


def test_no_more_children_than_parse_processes_run_at_once(tmp_path: Path) -> None:
    settings = KnowledgeSettings(isolated_parse_bytes=0, parse_processes=1)
    files = [tmp_path / f"{n}.json" for n in range(2)]
    threads = [
        threading.Thread(
            target=parse_in_child, args=(note_interval, "a.pdf", str(f).encode(), settings)
        )
        for f in files
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    (_, first_end), (second_start, _) = sorted(json.loads(f.read_text()) for f in files)
    assert first_end <= second_start, "the second parse ran while the first one did"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("isolated_parse_bytes", -1),
        ("parse_processes", 0),
        ("parse_processes", 65),
        ("parse_memory_mb", 255),
    ],
)
def test_bad_child_bounds_are_refused_naming_the_field(field: str, value: int) -> None:
    with pytest.raises(ValidationError) as refused:
        KnowledgeSettings(**{field: value})
    assert refused.value.errors()[0]["loc"] == (field,)


@pytest.mark.slow
def test_a_large_docx_leaves_no_memory_behind(tmp_path: Path) -> None:
    """Issue: a 15 MiB DOCX raised a server by 310 MB for good; parsed in a child, ≤ 50 MB."""
    text = words(200_000)
    runs = [
        "".join(
            f'<w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">{word} </w:t></w:r>'
            for word in text[i : i + 12]
        )
        for i in range(0, len(text), 12)
    ]
    body: list[bytes] = []
    size = 0
    while size < 14 * 1024 * 1024:
        piece = f"<w:p>{runs[len(body) % len(runs)]}</w:p>".encode()
        body.append(piece)
        size += len(piece)
    path = tmp_path / "large.docx"
    path.write_bytes(docx_with(body, extra={"word/media/image1.png": os.urandom(8 << 20)}))
    here = measure_load(path, isolated_parse_bytes=1 << 40)
    there = measure_load(path)
    assert here["status"] == there["status"] == "loaded" and here["chars"] == there["chars"]
    assert here["rss_growth_mb"] > 100, here  # the parse itself is that large
    assert there["rss_growth_mb"] < 50, there
