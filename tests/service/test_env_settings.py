"""The service's tuning settings from the environment (README, "Tuning by environment") are taken or refused."""

from __future__ import annotations

import pytest

from gantt.service.app import env_count


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
