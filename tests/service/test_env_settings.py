"""The service's tuning settings from the environment (README, "Tuning by environment") are taken or refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gantt.service.runtime import env_count


def test_unset_or_empty_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANTT_TEST_COUNT", raising=False)
    assert env_count("GANTT_TEST_COUNT", 7, 0) == 7
    monkeypatch.setenv("GANTT_TEST_COUNT", " ")
    assert env_count("GANTT_TEST_COUNT", 7, 0) == 7


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("1000000", 1_000_000), ("20_000", 20_000), (" 5 ", 5)])
def test_a_whole_number_is_taken(monkeypatch: pytest.MonkeyPatch, raw: str, value: int) -> None:
    monkeypatch.setenv("GANTT_TEST_COUNT", raw)
    assert env_count("GANTT_TEST_COUNT", 7, 0) == value


@pytest.mark.parametrize("raw", ["many", "1.5", "-1", "1e6"])
def test_anything_else_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("GANTT_TEST_COUNT", raw)
    with pytest.raises(ValueError, match="GANTT_TEST_COUNT"):
        env_count("GANTT_TEST_COUNT", 7, 0)


def test_below_the_minimum_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GANTT_TEST_COUNT", "0")
    with pytest.raises(ValueError, match="at least 1"):
        env_count("GANTT_TEST_COUNT", 16, 1)


@pytest.mark.parametrize("name", ["GANTT_THREADS", "GANTT_LOOP_DECISION_ROWS", "GANTT_DECIDERS",
                                  "GANTT_BODY_BUFFER_BYTES"])
def test_each_setting_of_the_service_is_checked_when_it_starts(name: str) -> None:
    """A worker imports the service's settings as it starts: a bad value stops it there, naming the setting."""
    env = {**os.environ, name: "-1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", "import gantt.service.runtime"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert f"{name}='-1'" in done.stderr, done.stderr[-2000:]
