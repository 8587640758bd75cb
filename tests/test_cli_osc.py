"""Issue 17, items 2 and 3: the ``gantt`` command as an openstackclient user expects it, through the real command
against a real ``gantt serve``: output formats, columns, sorting, limits, JSON errors, hosts registered, changed,
disabled and enabled, help on every option, tables not cut when piped, shell completion."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import gantt
from gantt.cli import options
from gantt.cli.dispatch import build_parser
from tests.cli_helpers import run, serving, widen
from tests.conftest import host_stats

SRC = str(Path(gantt.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    hosts = [("osc-a", host_stats(vcpus=8)), ("osc-b", host_stats(vcpus=32)), ("osc-c", host_stats(vcpus=16))]
    with serving(tmp_path_factory.mktemp("cli-osc"), hosts) as url:
        yield url


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    widen(monkeypatch)




def gantt_command(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed entry point's code path (python -m gantt) with this tree's sources, stdout piped."""
    environment = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run([sys.executable, "-m", "gantt", *argv], capture_output=True, text=True, timeout=120,
                          env=environment)


def test_every_option_and_argument_has_help() -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "gantt")
    assert missing == []


def test_select_help_shows_the_flavor_defaults() -> None:
    result = gantt_command("select", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "flavor name: a label only" in text and "(default cli)" in text
    assert "flavor vCPUs (default 1)" in text and "(default 512)" in text and "(default 1)" in text


def test_formats_columns_and_sorting(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "hosts", "--url", url, "-f", "json", "-c", "host", "-c", "VCPU",
                         "--sort-column", "host", "--sort-descending")
    assert status == 0
    rows = json.loads(out)
    assert [r["host"] for r in rows] == ["osc-c", "osc-b", "osc-a"]
    assert set(rows[0]) == {"host", "VCPU"} and rows[0]["VCPU"]["capacity"] == 16.0  # raw, not "0/16"
    # --json is -f json: every column of the listing
    status, out, _ = run(capsys, "hosts", "--url", url, "--json")
    assert status == 0 and {"host", "state", "last_report", "uuid", "traits"} <= set(json.loads(out)[0])
    status, out, _ = run(capsys, "hosts", "--url", url, "-f", "value", "-c", "host", "-c", "state",
                         "--sort-column", "host")
    assert out.splitlines() == ["osc-a up", "osc-b up", "osc-c up"]
    status, out, _ = run(capsys, "hosts", "--url", url, "-f", "csv", "-c", "host", "-c", "VCPU",
                         "--sort-column", "host", "--sort-ascending")
    assert list(csv.reader(io.StringIO(out))) == [["host", "VCPU"], ["osc-a", "0/8"], ["osc-b", "0/32"],
                                                  ["osc-c", "0/16"]]
    status, out, _ = run(capsys, "hosts", "show", "osc-b", "--url", url, "-f", "yaml", "-c", "host", "-c", "VCPU")
    assert status == 0 and yaml.safe_load(out)["VCPU"]["total"] == 32
    status, out, _ = run(capsys, "aggregates", "--url", url, "-f", "csv")
    assert status == 0 and out.splitlines() == ["\"id\",\"name\",\"hosts\",\"metadata\""]
    status, _, err = run(capsys, "hosts", "--url", url, "-c", "nope")
    assert status == 2 and "no column 'nope'" in err and "VCPU" in err
    status, _, err = run(capsys, "hosts", "show", "osc-a", "--url", url, "-f", "csv")
    assert status == 2 and "-f csv is for lists" in err


def test_limit_and_marker(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "hosts", "--url", url, "--limit", "2", "-f", "value", "-c", "host")
    assert status == 0 and out.splitlines() == ["osc-a", "osc-b"]
    status, out, _ = run(capsys, "hosts", "--url", url, "--limit", "2")
    assert "first 2 shown: --marker osc-b" in out
    status, out, _ = run(capsys, "hosts", "--url", url, "--marker", "osc-b", "-f", "value", "-c", "host")
    assert out.splitlines() == ["osc-c"]
    status, _, err = run(capsys, "hosts", "show", "osc-a", "--url", url, "--limit", "2")
    assert status == 2 and "--limit is for list only" in err


def test_errors_are_json_on_stdout_with_f_json(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "hosts", "show", "osc-nobody", "--url", url, "-f", "json")
    assert status == 1 and err == ""
    error = json.loads(out)["error"]
    assert error["status"] == 404 and "osc-nobody" in error["detail"] and error["field"] == "host"
    status, out, _ = run(capsys, "select", "--vcpus", "999", "--url", url, "--json")
    error = json.loads(out)["error"]
    assert status == 1 and error["status"] == 409 and error["explanation"]["steps"]
    status, out, _ = run(capsys, "hosts", "show", "--url", url, "-f", "json")  # a usage error
    assert status == 2 and json.loads(out)["error"]["detail"] == "hosts show needs NAME"
    status, out, _ = run(capsys, "hosts", "--url", "http://127.0.0.1:9", "-f", "json")
    assert status == 4 and json.loads(out)["error"]["status"] == 503


def test_register_set_disable_enable_a_host(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "hosts", "create", "osc-new", "--vcpus", "4", "--memory-mb", "8192", "--disk-gb",
                         "100", "--trait", "CUSTOM_FAST", "--inventory", "CUSTOM_GPU=2", "--url", url)
    assert status == 0 and "created osc-new" in out

    def show() -> dict[str, object]:
        status, out, _ = run(capsys, "hosts", "show", "osc-new", "--url", url, "-f", "json")
        assert status == 0
        shown: dict[str, object] = json.loads(out)
        return shown

    shown = show()
    assert shown["traits"] == ["CUSTOM_FAST"] and shown["CUSTOM_GPU"]["total"] == 2  # type: ignore[index]
    assert shown["VCPU"]["total"] == 4 and shown["state"] == "up"  # type: ignore[index]
    status, _, err = run(capsys, "hosts", "create", "osc-new", "--vcpus", "4", "--memory-mb", "1", "--disk-gb", "1",
                         "--url", url)
    assert status == 1 and "exists already" in err
    status, _, err = run(capsys, "hosts", "create", "osc-half", "--vcpus", "4", "--url", url)
    assert status == 2 and "needs --vcpus, --memory-mb and --disk-gb" in err

    assert run(capsys, "hosts", "set", "osc-new", "--vcpus", "6", "--url", url)[0] == 0
    shown = show()
    assert shown["VCPU"]["total"] == 6 and shown["traits"] == ["CUSTOM_FAST"]  # type: ignore[index]
    updated_at = shown["updated_at"]
    status, out, _ = run(capsys, "hosts", "disable", "osc-new", "--reason", "fan failure", "--url", url)
    assert status == 0 and "disabled osc-new (fan failure)" in out
    shown = show()
    assert shown["state"] == "disabled" and shown["disabled_reason"] == "fan failure"
    assert shown["VCPU"]["total"] == 6 and shown["updated_at"] == updated_at  # type: ignore[index]
    status, out, _ = run(capsys, "hosts", "--url", url, "-c", "host", "-c", "state", "-c", "disabled_reason")
    assert "disabled" in out and "fan failure" in out
    status, out, _ = run(capsys, "hosts", "enable", "osc-new", "--url", url, "-f", "json")
    assert status == 0 and json.loads(out)["disabled"] is False
    assert show()["state"] == "up" and show()["disabled_reason"] is None
    status, _, err = run(capsys, "hosts", "set", "osc-new", "--url", url)
    assert status == 2 and "nothing to change" in err
    status, _, err = run(capsys, "hosts", "enable", "osc-new", "--vcpus", "3", "--url", url)
    assert status == 2 and "--vcpus is for create and set only" in err
    status, _, err = run(capsys, "hosts", "set", "osc-nobody", "--vcpus", "3", "--url", url)
    assert status == 1 and "osc-nobody" in err
    assert run(capsys, "hosts", "delete", "osc-new", "--url", url)[0] == 0


def test_a_disabled_host_is_filtered_by_compute_filter(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "hosts", "disable", "osc-b", "--reason", "maintenance", "--url", url)[0] == 0
    try:
        status, out, _ = run(capsys, "select", "--dry-run", "--url", url, "-f", "json")
        assert status == 0 and "osc-b" not in {row["host"] for row in json.loads(out)}
    finally:
        assert run(capsys, "hosts", "enable", "osc-b", "--url", url)[0] == 0


def test_weights_rounded_in_tables_whole_in_json(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "select", "--dry-run", "--url", url, "-f", "json", "--vcpus", "3")
    assert status == 0
    rows = json.loads(out)
    with options.open_client(argparse.Namespace(url=url, token=None)) as client:
        exact = {c.host: c.weight for c in client.candidates({"flavor": {"vcpus": 3, "memory_mb": 512,
                                                                          "root_gb": 1}}).candidates}
    assert {r["host"]: r["weight"] for r in rows} == exact
    _, out, _ = run(capsys, "select", "--dry-run", "--url", url, "--vcpus", "3", "-f", "value", "-c", "host",
                    "-c", "weight")
    shown = dict(line.split() for line in out.splitlines())
    assert shown == {host: f"{weight:.4f}" for host, weight in exact.items()}


def test_tables_are_not_cut_when_piped(url: str) -> None:
    long_name = "osc-" + "x" * 150
    from gantt.client import SchedulerClient

    with SchedulerClient(url) as client:
        client.update_resource_stats(long_name, host_stats())
    try:
        result = gantt_command("hosts", "--url", url, "-c", "host", "-c", "traits", "-c", "aggregates",
                               env={"COLUMNS": "40"})
        assert result.returncode == 0, result.stderr
        assert any(long_name in line for line in result.stdout.splitlines())
        assert "…" not in result.stdout
    finally:
        with SchedulerClient(url) as client:
            client.delete_host(long_name)


def test_bash_completion_script() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = gantt_command("completion", "bash")
    assert script.returncode == 0
    probe = (script.stdout + "\ncomplete -p gantt\n"
             "COMP_WORDS=(gantt ho); COMP_CWORD=1; _gantt_complete; echo \"top: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt hosts di); COMP_CWORD=2; _gantt_complete; echo \"action: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt hosts --sort-); COMP_CWORD=2; _gantt_complete; echo \"option: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt allocations -f ''); COMP_CWORD=3; _gantt_complete; echo \"format: ${COMPREPLY[*]}\"\n")
    result = subprocess.run([bash, "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "complete -F _gantt_complete gantt" in lines
    assert "top: hosts host" in lines and "action: disable" in lines  # osc's singular noun too
    assert "option: --sort-column --sort-ascending --sort-descending" in lines
    assert "format: table json yaml value csv" in lines
    zsh = gantt_command("completion", "zsh")
    assert zsh.returncode == 0 and "bashcompinit" in zsh.stdout and "complete -F _gantt_complete gantt" in zsh.stdout


def test_zsh_completion_script() -> None:
    """The zsh script in a real zsh: it registers through bashcompinit, and the completer offers the words (zsh
    itself then keeps those matching what was typed, so the lists are whole here)."""
    zsh = shutil.which("zsh")
    if zsh is None:
        if os.environ.get("CI"):
            pytest.fail("zsh is missing (scripts/setup installs it when run as root)")
        pytest.skip("zsh is not installed")
    script = gantt_command("completion", "zsh")
    assert script.returncode == 0
    probe = ("autoload -U compinit && compinit -u\n" + script.stdout +
             "\nprint -r -- \"registered: ${_comps[gantt]}\"\nsetopt ksharrays\n"  # as _bash_complete sets it
             "COMP_WORDS=(gantt ho); COMP_CWORD=1; _gantt_complete; print -r -- \"top: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt hosts di); COMP_CWORD=2; _gantt_complete; print -r -- \"action: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(gantt allocations -f ''); COMP_CWORD=3; _gantt_complete; "
             "print -r -- \"format: ${COMPREPLY[*]}\"\n")
    result = subprocess.run([zsh, "-f", "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    found = {line.split(":", 1)[0]: line.split(":", 1)[1].split() for line in result.stdout.splitlines()}
    assert found["registered"] == ["_bash_complete", "-F", "_gantt_complete"]
    assert "hosts" in found["top"] and "simulate" in found["top"]
    assert "disable" in found["action"] and "enable" in found["action"]
    assert found["format"] == ["table", "json", "yaml", "value", "csv"]
