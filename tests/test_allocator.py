"""The glibc settings that keep freed numpy temporaries for reuse are accepted on this platform."""

from __future__ import annotations

import platform
import sys

import pytest

from gantt.base.allocator import keep_freed_memory


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_glibc_takes_the_thresholds() -> None:
    assert keep_freed_memory() is True
