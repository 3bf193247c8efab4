"""search2o.heap: freed memory the C allocator kept goes back to the system."""

from __future__ import annotations

import subprocess
import sys

import pytest

from search2o import heap

# 300,000 blocks of 1 KiB (above pymalloc's 512-byte limit, so glibc's heap holds them), all
# freed but the last: the heap's top stays in use, so glibc trims nothing by itself.
_PROBE = """
from pathlib import Path
from search2o.heap import release_free_memory

def rss_mib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024

blocks = [bytes(1000) + i.to_bytes(4, "little") for i in range(300_000)]
keep = blocks[-1]
del blocks
before = rss_mib()
released = release_free_memory()
print(before, rss_mib(), released)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; glibc's call")
def test_freed_heap_memory_goes_back_after_release() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    before, after, released = int(out[0]), int(out[1]), out[2]
    assert released == "True"
    assert before - after >= 200, f"RSS {before} MiB -> {after} MiB"


def test_a_c_library_without_malloc_trim_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    heap._malloc_trim.cache_clear()
    monkeypatch.setattr(heap.ctypes.util, "find_library", lambda _name: "libnot-there.so.0")
    try:
        assert heap.release_free_memory() is False
    finally:
        heap._malloc_trim.cache_clear()


def test_nothing_is_called_while_the_interpreter_shuts_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A job thread may end during shutdown; it must not reach into ctypes then.
    monkeypatch.setattr(heap.sys, "is_finalizing", lambda: True)
    assert heap.release_free_memory() is False
