"""Issue 17 item 4: a broken config file, a store URL of no known kind and an etcd nobody answers for are one
clear line from ``gantt serve`` (exit 2 for what the operator wrote, 3 for a store it cannot use), never a
traceback, and the unreachable cluster within seconds, not after a 30 s snapshot."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _serve(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gantt", "serve", "--port", "0", *args], capture_output=True,
                          text=True, timeout=60)
    return done, time.monotonic() - started


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr and "serving" not in done.stdout, done.stderr
    return lines[0]


@pytest.mark.parametrize(("text", "expected"), [
    ("[DEFAULT\nservice_down_time = 60\n", "line 1: '[DEFAULT' is not a [section] header"),
    ("[DEFAULT]\nservice_down_time = 60\n[scheduler\nmax_attempts = 3\n",
     "line 3: '[scheduler' is not a [section] header"),
])
def test_a_broken_ini_file_names_the_line(tmp_path: Path, text: str, expected: str) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(text)
    done, _ = _serve("--config", str(conf), "--store", "memory://")
    assert done.returncode == 2
    line = _one_line(done)
    assert str(conf) in line and expected in line


def test_a_store_url_of_no_known_kind_is_refused() -> None:
    done, _ = _serve("--store", "foo://x")
    assert done.returncode == 2
    assert "unknown store URL 'foo://x'" in _one_line(done)


def test_an_etcd_nobody_answers_for_is_refused_within_seconds() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done, took = _serve("--store", f"etcd://127.0.0.1:{port}")
    assert done.returncode == 3
    assert f"etcd cluster 127.0.0.1:{port} unavailable" in _one_line(done)
    assert took < 15  # the URL's budget (2 s) plus start-up, not a 30 s snapshot and a traceback


def test_start_up_says_which_config_store_filters_and_weighers_apply(tmp_path: Path) -> None:
    """Issue 17 item 6: one line at start names the config file, the store and what decides."""
    conf = tmp_path / "gantt.toml"
    conf.write_text('[filter_scheduler]\nenabled_filters = ["ComputeFilter", "AvailabilityZoneFilter"]\n'
                    'weight_classes = ["RAMWeigher"]\n')
    process = subprocess.Popen([sys.executable, "-m", "gantt", "serve", "--config", str(conf), "--store",
                                "memory://", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first, second = process.stdout.readline(), process.stdout.readline()
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert first.startswith(f"gantt: config {conf}; store memory://; filters ResourceFilter,")
    assert "ComputeFilter, AvailabilityZoneFilter; weighers RAMWeigher" in first
    assert second.startswith("gantt: serving memory:// on http://127.0.0.1:")
