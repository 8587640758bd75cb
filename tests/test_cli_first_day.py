"""Issue 34, item 6: paths and flags on an operator's first day, through the real command and a real server:
the store URL's path said at start (and a mistaken relative one refused), audit reading its store from the config
and printing JSON, distinct exit statuses, stderr not wrapped when piped, ``migrations list``, a subcommand's own
usage, openstackclient's singular nouns."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import gantt
from gantt import cli
from gantt.cli.server_process import toml_text
from gantt.model import Allocation, HostReport
from gantt.store.base import Batch, open_store
from tests.cli_helpers import run, serving, widen
from tests.conftest import host_stats

SRC = str(Path(gantt.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("cli-day"), [(f"day-{i}", host_stats(vcpus=8)) for i in range(3)]) as url:
        yield url


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    widen(monkeypatch)




def gantt_command(*argv: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m gantt`` with this tree's sources, stdout and stderr piped (no terminal, no COLUMNS)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "GANTT_URL", "GANTT_CONFIG")}
    env["PYTHONPATH"] = SRC
    return subprocess.run([sys.executable, "-m", "gantt", *argv], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


# ---------------------------------------------------------------------------------------- exit status


def test_unreachable_is_not_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "hosts", "--url", "http://127.0.0.1:9")
    assert status == cli.NO_ANSWER == 4 and "cannot reach Gantt" in err
    status, out, _ = run(capsys, "select", "--url", "http://127.0.0.1:9", "-f", "json")
    assert status == 4 and json.loads(out)["error"]["status"] == 503


def test_a_server_error_is_no_answer_and_a_refusal_is_1(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    class Failing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"title": "Store unavailable", "status": 503, "detail": "the store is read-only"}'
            self.send_response(503)
            self.send_header("content-type", "application/problem+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, _, err = run(capsys, "hosts", "--url", f"http://127.0.0.1:{server.server_address[1]}")
        assert status == 4 and "read-only" in err
    finally:
        server.shutdown()
        server.server_close()
    assert run(capsys, "select", "--vcpus", "999", "--url", url)[0] == 1
    assert run(capsys, "hosts", "show", "day-nobody", "--url", url)[0] == 1


def test_help_documents_the_exit_statuses() -> None:
    result = gantt_command("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for status in ("0 done", "1 the service answered no", "2 bad usage", "3 the store cannot be used",
                   "4 no answer from the service"):
        assert status in text


# -------------------------------------------------------------------------------------------- --store


def test_a_relative_store_path_is_said_whole(tmp_path: Path) -> None:
    """sqlite:///tmp/x.sqlite is ./tmp/x.sqlite (SQLAlchemy's rule): a directory that is not there is refused
    with the four-slash spelling, not created; a relative file that can be made is named by its absolute path."""
    result = gantt_command("serve", "--store", "sqlite:///nowhere-dir/x.sqlite", "--port", "0", cwd=tmp_path)
    assert result.returncode == 3
    err = " ".join(result.stderr.split())
    assert f"the directory {tmp_path}/nowhere-dir does not exist" in err
    assert "sqlite:////nowhere-dir/x.sqlite" in err
    assert not (tmp_path / "nowhere-dir").exists()

    env = {k: v for k, v in os.environ.items() if k not in ("GANTT_CONFIG",)}
    env["PYTHONPATH"] = SRC
    proc = subprocess.Popen([sys.executable, "-m", "gantt", "serve", "--store", "sqlite:///here.sqlite", "--port",
                             "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert f"serving sqlite:///here.sqlite (file {tmp_path}/here.sqlite) on http://127.0.0.1:" in lines[1], lines


# ---------------------------------------------------------------------------------------------- audit


def _stores(tmp_path: Path) -> tuple[str, str]:
    good = f"sqlite:///{tmp_path}/good.sqlite"
    with open_store(good) as store:
        store.commit(Batch(reports=[HostReport.of("h0", host_stats(vcpus=4))]))
        store.commit(Batch(allocations=[Allocation("vm-1", "h0", "h0", {"VCPU": 2})]))
    bad = f"sqlite:///{tmp_path}/bad.sqlite"
    with open_store(bad) as store:
        store.commit(Batch(reports=[HostReport.of("h0", host_stats(vcpus=4))]))
        store.commit(Batch(allocations=[Allocation("vm-1", "h0", "h0", {"VCPU": 3}),
                                        Allocation("vm-2", "h0", "h0", {"VCPU": 3})]))
    return good, bad


def test_audit_reads_its_store_from_the_config_and_prints_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GANTT_CONFIG", raising=False)
    good, bad = _stores(tmp_path)
    config = tmp_path / "gantt.toml"
    config.write_text(toml_text({"gantt": {"store": good}}))
    status, out, _ = run(capsys, "audit", "--config", str(config))
    assert status == 0 and "audit ok" in out
    status, out, _ = run(capsys, "audit", "--config", str(config), "-f", "json")
    assert status == 0
    body = json.loads(out)
    assert body["ok"] is True and body["violations"] == 0
    assert body["namespaces"][0]["nodes"] == 1 and body["namespaces"][0]["allocations"] == 1
    status, out, _ = run(capsys, "audit", "--config", str(config), "--store", bad, "-f", "json")  # --store wins
    body = json.loads(out)
    assert status == 1 and body["ok"] is False and body["violations"] >= 1
    assert any("VCPU" in v for v in body["namespaces"][0]["violations"])
    status, out, _ = run(capsys, "audit", "--store", f"sqlite:///{tmp_path}/missing.sqlite", "-f", "json")
    assert status == 3 and f"{tmp_path}/missing.sqlite" in json.loads(out)["error"]["detail"]


# ----------------------------------------------------------------------------------------- piped stderr


def test_stderr_is_not_wrapped_when_piped(url: str) -> None:
    result = gantt_command("select", "--vcpus", "999", "--url", url)
    assert result.returncode == 1
    assert any(line.strip() == "VCPU 999 can never fit: max_unit 8 < 999 asked on every node"
               for line in result.stderr.splitlines()), result.stderr
    long_url = "http://127.0.0.1:9/" + "x" * 120
    result = gantt_command("hosts", "--url", long_url)
    assert result.returncode == 4
    [line] = result.stderr.strip().splitlines()
    assert long_url in line and line.endswith("--url / GANTT_URL)")


# ------------------------------------------------------------------------------------ migrations list


def test_migrations_list_shows_moves_in_progress(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "select", "--vcpus", "2", "--instance-uuid", "day-vm", "--url", url)[0] == 0
    try:
        status, out, _ = run(capsys, "select", "--vcpus", "4", "--instance-uuid", "day-vm", "--migration-uuid",
                             "day-mig", "--url", url, "-f", "json")
        assert status == 0
        [destination] = [row["host"] for row in json.loads(out)]
        status, out, _ = run(capsys, "migrations", "list", "--url", url, "-f", "json")
        assert status == 0
        [move] = json.loads(out)
        assert move["migration_uuid"] == "day-mig" and move["instance_uuid"] == "day-vm"
        assert move["destination"] == destination and move["resources"]["VCPU"] == 2
        status, out, _ = run(capsys, "migrations", "--url", url)  # list is the default action
        assert status == 0 and "day-mig" in out and "1 moves in progress" in out
        assert run(capsys, "migrations", "confirm", "day-mig", "--url", url)[0] == 0
        status, out, _ = run(capsys, "migrations", "list", "--url", url, "-f", "json")
        assert status == 0 and json.loads(out) == []
        status, _, err = run(capsys, "migrations", "confirm", "--url", url)
        assert status == 2 and "migrations confirm needs MIGRATION" in err
    finally:
        run(capsys, "allocations", "release", "day-vm", "--url", url)


# -------------------------------------------------------------------------- usage, singular nouns


def test_a_missing_name_prints_the_subcommand_usage(url: str) -> None:
    result = gantt_command("hosts", "show", "--url", url)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: gantt hosts ") and "hosts show needs NAME" in result.stderr
    assert "COMMAND" not in result.stderr  # not the top-level usage


@pytest.mark.parametrize(("singular", "plural"), [("host", "hosts"), ("aggregate", "aggregates"),
                                                  ("allocation", "allocations"), ("migration", "migrations")])
def test_singular_nouns_are_the_same_commands(url: str, capsys: pytest.CaptureFixture[str], singular: str,
                                              plural: str) -> None:
    def listing(noun: str) -> list[dict[str, object]]:
        status, out, err = run(capsys, noun, "list", "--url", url, "-f", "json")
        assert status == 0, err
        return [{k: v for k, v in row.items() if k != "last_report"} for row in json.loads(out)]  # time moves

    assert listing(singular) == listing(plural)


def test_singular_show_and_its_usage(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "host", "show", "day-1", "--url", url, "-f", "json")
    assert status == 0 and json.loads(out)["host"] == "day-1"
    status, _, err = run(capsys, "host", "show", "--url", url)
    assert status == 2 and "hosts show needs NAME" in err
    status, _, err = run(capsys, "host", "show", "day-1", "--url", url, "--limit", "3")
    assert status == 2 and "--limit is for list only" in err


def test_completion_knows_the_singular_nouns() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = gantt_command("completion", "bash")
    assert script.returncode == 0
    probe = (script.stdout +
             "\nCOMP_WORDS=(gantt hos); COMP_CWORD=1; _gantt_complete; echo \"top: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt host di); COMP_CWORD=2; _gantt_complete; echo \"action: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt migration ''); COMP_CWORD=2; _gantt_complete; echo \"migration: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt audit -f ''); COMP_CWORD=3; _gantt_complete; echo \"audit: ${COMPREPLY[*]}\"\n")
    result = subprocess.run([bash, "--norc", "--noprofile", "-c", probe], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    found = {line.split(":", 1)[0]: line.split(":", 1)[1].split() for line in result.stdout.splitlines()}
    assert found["top"] == ["hosts", "host"]
    assert found["action"] == ["disable"]
    assert found["migration"] == ["list", "confirm", "revert"]
    assert found["audit"] == ["table", "json"]
