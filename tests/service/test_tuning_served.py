"""``[tuning]`` and its environment variables (gantt.config.tuning) as ``gantt serve`` takes them: a bad value stops
the start naming it, and the file's value is what a worker runs with."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gantt.config.tuning import ENVIRONMENT
from tests.service.server import ServerProcess
from tests.service.test_connection_limits import _read_all
from tests.service.test_hostile_bodies import TOKEN, _connect, _head, _status


def _serve(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gantt", "serve", "--store", f"sqlite:///{tmp_path}/gantt.sqlite",
               "--host", "127.0.0.1", "--port", "0", *args]
    return subprocess.run(command, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env},
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("variable", sorted(ENVIRONMENT.values()))
def test_a_bad_variable_stops_the_start_naming_it(tmp_path: Path, variable: str) -> None:
    done = _serve(tmp_path, {variable: "-1"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{variable}='-1'" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_bad_option_stops_the_start_naming_it(tmp_path: Path) -> None:
    (tmp_path / "gantt.toml").write_text("[tuning]\nthreads = 0\n")
    done = _serve(tmp_path, {}, "--config", str(tmp_path / "gantt.toml"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "[tuning] threads must be at least 1" in done.stderr, done.stderr[-2000:]


def test_the_files_body_buffer_is_the_workers(tmp_path: Path) -> None:
    """Room for one 9,000-byte body at once: a second one in progress meanwhile is refused (503) before it is
    read. (The buffer is never less than the body limit, so the limit is set beside it.)"""
    config = {"gantt": {"max_body_bytes": 10_000}, "tuning": {"body_buffer_bytes": 10_000}}
    with ServerProcess(f"sqlite:///{tmp_path}/gantt.sqlite", workdir=tmp_path, config=config,
                       token=TOKEN) as server, _connect(server) as first:
        first.sendall(_head("POST", "/v1/select_destinations", 9_000) + b" " * 100)
        time.sleep(0.5)
        with _connect(server) as second:
            second.sendall(_head("POST", "/v1/select_destinations", 9_000))
            answer = _read_all(second)
        assert _status(answer) == 503, answer[:300]


def test_a_named_compute_namespace_runs_with_the_files_tuning() -> None:
    """[tuning] is the whole service's, as [gantt] is: a namespace's own Config has none, its Service the file's."""
    from gantt.config import Config
    from gantt.service.namespaces import build

    config = Config.from_dict({"tuning": {"threads": 3, "deciders": 0},
                               "namespace": {"blue": {"kind": "compute"}}})
    served = build(config, None, 0)
    assert (served["blue"].service.tuning.threads, served["blue"].service.tuning.deciders) == (3, 0)
