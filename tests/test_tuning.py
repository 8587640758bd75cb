"""``[tuning]`` (gantt.config.tuning): read from a TOML file and from a nova.conf, refused naming the option when out
of range, and the environment variables that came before the section taken in its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from gantt.config import Config, load_config
from gantt.config.tuning import ENVIRONMENT, TuningSection


def test_the_defaults_are_those_the_service_ran_with() -> None:
    assert Config().tuning == TuningSection(threads=16, loop_decision_rows=200_000, deciders=1,
                                            body_buffer_bytes=64 * 1024 * 1024)


def test_a_toml_file_sets_them(tmp_path: Path) -> None:
    path = tmp_path / "gantt.toml"
    path.write_text("[tuning]\nthreads = 4\nloop_decision_rows = 0\ndeciders = 2\nbody_buffer_bytes = 1_000_000\n")
    assert load_config(path).tuning == TuningSection(threads=4, loop_decision_rows=0, deciders=2,
                                                     body_buffer_bytes=1_000_000)


def test_a_nova_conf_sets_them(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text("[DEFAULT]\ntransport_url = rabbit://x\n[tuning]\nthreads = 8\ndeciders = 0\n")
    tuning = load_config(path).tuning
    assert (tuning.threads, tuning.deciders, tuning.loop_decision_rows) == (8, 0, 200_000)


@pytest.mark.parametrize(("option", "value"), [("threads", 0), ("loop_decision_rows", -1), ("deciders", -1),
                                               ("body_buffer_bytes", 0)])
def test_a_value_below_its_minimum_is_refused_naming_it(option: str, value: int) -> None:
    with pytest.raises(ValueError, match=rf"\[tuning\] {option} must be at least"):
        Config.from_dict({"tuning": {option: value}})


def test_a_typo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text("[tuning]\nthread = 8\n")
    with pytest.raises(ValueError, match="thread"):
        load_config(path)


def test_unset_or_blank_variables_keep_the_files_values() -> None:
    tuning = TuningSection(threads=3)
    assert tuning.with_environment({}) == tuning
    assert tuning.with_environment({"GANTT_THREADS": " "}) == tuning


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("1000000", 1_000_000), ("20_000", 20_000), (" 5 ", 5)])
def test_a_whole_number_in_the_environment_is_taken_before_the_file(raw: str, value: int) -> None:
    tuning = TuningSection(loop_decision_rows=7).with_environment({"GANTT_LOOP_DECISION_ROWS": raw})
    assert tuning.loop_decision_rows == value


@pytest.mark.parametrize("raw", ["many", "1.5", "-1", "1e6"])
@pytest.mark.parametrize("variable", sorted(ENVIRONMENT.values()))
def test_anything_else_is_refused_naming_the_variable(variable: str, raw: str) -> None:
    with pytest.raises(ValueError, match=f"{variable}="):
        TuningSection().with_environment({variable: raw})


def test_below_the_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        TuningSection().with_environment({"GANTT_THREADS": "0"})
    assert TuningSection().with_environment({"GANTT_DECIDERS": "0"}).deciders == 0
