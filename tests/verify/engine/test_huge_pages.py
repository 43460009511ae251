"""The forkserver backs its large anonymous regions with huge pages (_linux), so that the
fork and exit of every rank copy and tear down a few hundred page-table entries instead of
tens of thousands."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.verify.engine import _linux

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _anon_huge_kib() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


@pytest.mark.skipif(not THP.exists() or "[never]" in THP.read_text(),
                    reason="this kernel has no transparent huge pages")
def test_a_large_heap_region_is_collapsed_into_huge_pages() -> None:
    block = bytearray(b"x" * (64 << 20))  # 64 MiB of touched anonymous memory
    before = _anon_huge_kib()
    collapsed = _linux.collapse_heap_into_huge_pages()
    assert collapsed >= 32 << 20
    assert _anon_huge_kib() - before >= 32 << 10
    assert block[-1:] == b"x"  # the memory is the same memory
