"""Parse a large PDF or DOCX in a child process, so its memory goes back to the system.

A parser's peak memory is many times the file (python-docx builds an lxml tree of 7 to 21
bytes per byte of XML; pypdf keeps every decoded stream), and CPython's allocator rarely gives
such a peak back to the kernel: a 15 MiB DOCX left a server 300 MB larger for good. A file of
``knowledge.isolated_parse_bytes`` or more is therefore read by a fresh interpreter,
``python -m search2o.knowledge.isolation``, that returns the
:class:`~search2o.knowledge.sections.LoadedDocument` and exits; the server only ever holds the
file and the extracted text. A fresh interpreter (not ``fork``) inherits no lock or thread of
the server, and (unlike multiprocessing's ``spawn``) does not re-run the server's main
module: it imports only the loaders, about 0.2 s.

The child also bounds what one document can take, on top of the loaders' own bounds:

* its address space is capped at ``knowledge.parse_memory_mb`` (``RLIMIT_AS``,
  setrlimit(2)), so a file that would need more fails with ``MemoryError`` in the child, and
  the document is refused naming that setting, instead of the kernel's OOM killer choosing
  a process of the server;
* it is killed after ``2 * knowledge.max_extract_seconds + 60`` seconds of wall time (the
  loaders count CPU seconds; this catches a parser stuck off the CPU);
* at most ``knowledge.parse_processes`` children run at once; more parses wait their turn.

Wire format, both ways a pickle (the child is our own code, run from our own interpreter):
the request is ``(sys.path, pickle of (loader, filename, data, settings))``, so the loader
is resolved on the parent's import path; the reply is ``("ok", document)``,
``("error", class name, field, reason)`` or ``("memory",)``. The loaders' errors cross as
names and strings: :class:`~search2o.errors.InputError` and its subclasses take two
arguments, which exception pickling cannot restore.
"""

from __future__ import annotations

import logging
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from search2o.errors import CorruptFileError, InputError, UnsupportedFileError
from search2o.knowledge.bounds import over_bound
from search2o.knowledge.sections import LoadedDocument
from search2o.knowledge.settings import KnowledgeSettings

__all__ = ["parse_in_child"]

log = logging.getLogger(__name__)

Loader = Callable[[str, bytes, KnowledgeSettings], LoadedDocument]

_STARTUP_S = 60.0
"""Wall seconds a child may take beyond its parse budget (interpreter start, imports)."""

_ERRORS: dict[str, type[InputError]] = {
    cls.__name__: cls for cls in (InputError, CorruptFileError, UnsupportedFileError)
}

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The directory holding the ``search2o`` package the server runs, first on the child's path."""

_slots_lock = threading.Lock()
_slots: dict[int, threading.BoundedSemaphore] = {}


def _slot(processes: int) -> threading.BoundedSemaphore:
    """Return the process-wide semaphore of ``processes`` parse slots (one per setting)."""
    with _slots_lock:
        return _slots.setdefault(processes, threading.BoundedSemaphore(processes))


def wall_seconds(settings: KnowledgeSettings) -> float:
    """Return the wall seconds one child parse may take before it is killed."""
    return 2 * settings.max_extract_seconds + _STARTUP_S


def parse_in_child(
    loader: Loader, filename: str, data: bytes, settings: KnowledgeSettings
) -> LoadedDocument:
    """Run ``loader(filename, data, settings)`` in a fresh interpreter; return its result.

    Args:
        loader: a module-level loader function (it is pickled by reference), e.g.
            :func:`search2o.knowledge.docx_loader.load_docx`.
        filename: the file's name, named as the ``field`` of errors.
        data: the file's bytes.
        settings: the bounds; ``parse_memory_mb``, ``parse_processes`` and
            ``max_extract_seconds`` bound the child itself.

    Returns:
        What the loader returned in the child.

    Raises:
        InputError: the loader's own refusals, with their class (``CorruptFileError``,
            ``UnsupportedFileError``); over ``knowledge.parse_memory_mb`` or the wall-time
            bound, with a reason naming the setting.
        CorruptFileError: the child died without an answer (a signal, a crash in a C parser).

    """
    request = pickle.dumps((sys.path, pickle.dumps((loader, filename, data, settings))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    with _slot(settings.parse_processes):
        child = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            out, err = child.communicate(request, timeout=wall_seconds(settings))
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise over_bound(
                filename,
                "max_extract_seconds",
                f"reading its text took more than {wall_seconds(settings):g} seconds",
            ) from None
        except BaseException:
            child.kill()
            child.communicate()
            raise
    reply = _reply(out)
    if reply is None:
        code = child.returncode or 0
        died = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        log.warning(
            "the parser of %s ended without an answer (%s): %s",
            filename,
            died,
            err.decode(errors="replace")[-2000:],
        )
        raise CorruptFileError(filename, f"its parser process ended without an answer ({died})")
    if reply[0] == "ok":
        document: LoadedDocument = reply[1]
        return document
    if reply[0] == "memory":
        raise over_bound(
            filename,
            "parse_memory_mb",
            f"reading it needs more than {settings.parse_memory_mb} MB of memory",
        )
    _, name, field, reason = reply
    raise _ERRORS[name](field, reason)


def _reply(out: bytes) -> tuple[Any, ...] | None:
    """Return the child's reply, or ``None`` when it wrote none (it died first)."""
    if not out:
        return None
    try:
        reply: tuple[Any, ...] = pickle.loads(out)
    except (pickle.UnpicklingError, EOFError, ValueError):
        return None
    return reply


def _ran_out_of_memory(exc: BaseException | None) -> bool:
    """Tell whether ``exc`` or an error it was raised from or during is a ``MemoryError``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, MemoryError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _parse(job: bytes) -> tuple[Any, ...]:
    """Unpickle ``(loader, filename, data, settings)``, cap memory, parse; return the reply."""
    loader, filename, data, settings = pickle.loads(job)
    limit = settings.parse_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        return ("ok", loader(filename, data, settings))
    except BaseException as exc:  # every failure is reported to the parent
        if _ran_out_of_memory(exc):
            return ("memory",)
        if isinstance(exc, InputError):
            name = type(exc).__name__ if type(exc).__name__ in _ERRORS else "InputError"
            return ("error", name, exc.field, exc.reason)
        return ("error", "CorruptFileError", filename, f"cannot parse it: {exc}")


def _main(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Live the child's whole life: read the request, parse, write the reply."""
    path, job = pickle.load(stdin)
    sys.path[:] = path
    reply = _parse(job)
    try:
        stdout.write(pickle.dumps(reply))
    except MemoryError:  # the document itself did not fit back through the pipe
        stdout.write(pickle.dumps(("memory",)))
    stdout.flush()


if __name__ == "__main__":
    _reply_to = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print of a parser goes to stderr, not into the reply
    _main(sys.stdin.buffer, _reply_to)
