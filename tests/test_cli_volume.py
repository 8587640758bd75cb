"""Issue 34, item 2: the client commands on a volume namespace, against a real ``gantt serve`` with one. Each
command either speaks the volume face (pools, volumes) or refuses before sending, naming what to use."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gantt.cli.dispatch import build_parser
from tests.cli_helpers import run, widen
from tests.service.server import ServerProcess

CONFIG = {"DEFAULT": {"service_down_time": 86400}, "namespace.volume": {"kind": "volume"}}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ServerProcess("memory://", config=CONFIG, workdir=tmp_path_factory.mktemp("cli-volume")) as server:
        yield server.url


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    widen(monkeypatch)




def vol(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    return run(capsys, *argv, "--url", url, "--namespace", "volume")


def test_pools_volumes_and_their_life(url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = vol(capsys, url, "hosts", "-f", "json")
    assert status == 0 and json.loads(out) == [], err
    status, _, err = vol(capsys, url, "hosts", "--limit", "0")  # was a traceback
    assert status == 0, err

    status, out, err = vol(capsys, url, "hosts", "create", "node1@lvm", "--disk-gb", "100")
    assert status == 0 and "created pool node1@lvm#lvm of 100 GiB" in out, err
    status, _, err = vol(capsys, url, "hosts", "create", "node1@lvm", "--disk-gb", "50", "--node", "fast")
    assert status == 1 and "exists already" in err  # a second report would drop the first pool
    assert vol(capsys, url, "hosts", "create", "node2@lvm", "--disk-gb", "20", "--node", "small")[0] == 0
    status, _, err = vol(capsys, url, "hosts", "create", "node3@lvm", "--vcpus", "4", "--disk-gb", "1")
    assert status == 2 and "--vcpus" in err and "GiB only" in err

    status, out, _ = vol(capsys, url, "hosts", "-f", "json", "--sort-column", "host")
    pools = json.loads(out)
    assert [(p["host"], p["pool"], p["total_capacity_gb"]) for p in pools] == [("node1@lvm", "lvm", 100),
                                                                             ("node2@lvm", "small", 20)]
    status, out, _ = vol(capsys, url, "hosts", "--limit", "1", "-f", "value", "-c", "host")
    assert status == 0 and out.split() == ["node1@lvm"]
    status, out, _ = vol(capsys, url, "hosts", "--limit", "1")
    assert "--marker node1@lvm#lvm for the next ones" in out
    status, out, _ = vol(capsys, url, "hosts", "--marker", "node1@lvm#lvm", "-f", "value", "-c", "host")
    assert out.split() == ["node2@lvm"]
    status, out, _ = vol(capsys, url, "hosts", "show", "node2@lvm", "-f", "json")
    assert status == 0 and json.loads(out)["pool"] == "small"

    # a volume of 30 GiB does not fit the 20 GiB pool (thick: no over-subscription)
    status, out, err = vol(capsys, url, "select", "--size", "30", "--instance-uuid", "vol-1",
                           "--extra-spec", "provisioning:type=thick", "-f", "json")
    assert status == 0, err
    [placed] = json.loads(out)
    assert placed["volume_id"] == "vol-1" and placed["backend_id"] == "node1@lvm#lvm"
    status, out, _ = vol(capsys, url, "select", "--size", "30", "--instance-uuid", "vol-1", "-f", "json")
    assert status == 0 and json.loads(out)[0]["backend_id"] == "node1@lvm#lvm"  # asking again: the same claim
    status, _, err = vol(capsys, url, "select", "--size", "500", "--extra-spec", "provisioning:type=thick")
    assert status == 1 and "reason: CapacityFilter" in err
    spec = tmp_path / "volume.json"
    spec.write_text(json.dumps({"volume_id": "vol-2", "volume_properties": {"size": 5}}))
    status, out, err = vol(capsys, url, "select", "--spec", str(spec), "-f", "json")
    assert status == 0 and json.loads(out)[0]["volume_id"] == "vol-2", err

    status, out, _ = vol(capsys, url, "allocations", "-f", "json")
    assert {a["consumer_uuid"]: a["resources"] for a in json.loads(out)} == {"vol-1": {"VOLUME_GB": 30},
                                                                            "vol-2": {"VOLUME_GB": 5}}
    status, out, _ = vol(capsys, url, "allocations", "--limit", "1", "-f", "value", "-c", "consumer_uuid")
    assert status == 0 and out.split() == ["vol-1"]
    status, out, _ = vol(capsys, url, "allocations", "show", "vol-1", "-f", "json")
    assert status == 0 and json.loads(out)["host"] == "node1@lvm"
    status, out, _ = vol(capsys, url, "hosts", "show", "node1@lvm", "-f", "json")
    assert json.loads(out)["volumes"] >= 1

    status, _, err = vol(capsys, url, "hosts", "delete", "node1@lvm")
    assert status == 1 and "add --yes" in err and "vol-1" in err
    assert vol(capsys, url, "allocations", "release", "vol-2")[0] == 0
    status, out, _ = vol(capsys, url, "hosts", "delete", "node1@lvm", "--yes")
    assert status == 0 and "released 1 volume(s)" in out
    status, _, err = vol(capsys, url, "hosts", "show", "node1@lvm")
    assert status == 1 and "no pool node1@lvm" in err
    assert vol(capsys, url, "hosts", "delete", "node2@lvm")[0] == 0


@pytest.mark.parametrize(("argv", "says"), [
    (["aggregates"], "has no aggregates"),
    (["aggregates", "create", "a1"], "has no aggregates"),
    (["migrations"], "has no moves"),
    (["migrations", "confirm", "m1"], "has no moves"),
    (["select", "--vcpus", "4"], "--vcpus: for compute namespaces"),
    (["select", "--required-trait", "CUSTOM_X"], "--required-trait: for compute namespaces"),
    (["select", "--dry-run"], "no dry run"),
    (["select", "--num-instances", "2"], "one volume at a time"),
    (["hosts", "set", "node1@lvm", "--disk-gb", "3"], "changes by its own report"),
    (["hosts", "disable", "node1@lvm"], "changes by its own report"),
    (["hosts", "create", "node9@lvm"], "needs --disk-gb"),
])
def test_what_a_volume_namespace_has_not_is_refused_before_sending(url: str, capsys: pytest.CaptureFixture[str],
                                                                  argv: list[str], says: str) -> None:
    status, _, err = vol(capsys, url, *argv)
    assert status == 2 and says in " ".join(err.split())


def test_size_is_for_volume_namespaces(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "select", "--size", "3", "--url", url)
    assert status == 2 and "--size is a volume's size" in err


def _actions() -> Iterator[tuple[str, str]]:
    """Every (command, action) of the client commands that take --namespace."""
    for action in build_parser()._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        seen = set()
        for name, sub in action.choices.items():
            if id(sub) in seen or not any("--namespace" in a.option_strings for a in sub._actions) \
                    or name == "audit":
                continue
            seen.add(id(sub))
            choices = next((a.choices for a in sub._actions if a.dest == "action"), None) or [None]
            for verb in choices:
                yield name, verb


@pytest.mark.parametrize(("command", "action"), list(_actions()))
def test_every_namespaced_command_speaks_volume_or_refuses(url: str, capsys: pytest.CaptureFixture[str],
                                                          command: str, action: str | None) -> None:
    """No command reaches the volume face with the compute face's calls (a 400 on a compute field, a 405, a
    decode error): it answers, says not found / exists, or refuses with a usage error naming the volume side."""
    argv = [command] + ([action] if action else [])
    positional = {"hosts": ["nodeX@lvm"], "aggregates": ["agg"], "allocations": ["volX"],
                  "migrations": ["migX"]}.get(command, [])
    if action not in (None, "list"):
        argv += positional + (["nodeY@lvm"] if command == "aggregates" and "host" in action else [])
    if command == "hosts" and action == "create":
        argv += ["--disk-gb", "1"]
    status, _, err = vol(capsys, url, *argv)
    text = " ".join(err.split())
    assert "Traceback" not in err
    for wrong in ("unknown query parameter", "is not allowed on", "unknown field", "Method not allowed"):
        assert wrong not in text, (argv, text)
    assert status in (0, 1, 2), (argv, status, text)
    if status == 2:
        assert "volume" in text or "needs" in text, (argv, text)
    if command == "hosts" and action == "create":
        assert vol(capsys, url, "hosts", "delete", "nodeX@lvm", "--yes")[0] == 0
