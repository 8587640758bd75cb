"""Issue 34, items 1 and 4: the ``gantt`` command keeps every value of a repeated option (a dropped
``--required-trait`` is a wrong placement), and a NoValidHost says what really blocks, against a real server."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest

from gantt.cli.dispatch import build_parser
from gantt.client import SchedulerClient
from gantt.sim import cli as sim_cli
from tests.cli_helpers import run, widen
from tests.conftest import host_stats
from tests.service.server import ServerProcess

AVX2, SSD = "HW_CPU_X86_AVX2", "CUSTOM_SSD"
# One host per combination of two traits and two custom resources: a request that keeps only one of two values
# lands on a host that lacks the other.
HOSTS = {
    "rp-none": host_stats(),
    "rp-avx": host_stats(traits=[AVX2]),
    "rp-ssd": host_stats(traits=[SSD]),
    "rp-both": host_stats(traits=[AVX2, SSD]),
    "rp-gpu": host_stats(inventories={"CUSTOM_GPU": {"total": 2}}),
    "rp-gpu-fpga": host_stats(inventories={"CUSTOM_GPU": {"total": 2}, "CUSTOM_FPGA": {"total": 1}}),
}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = {"filter_scheduler": {"enabled_filters": ["ComputeFilter", "DifferentHostFilter", "SameHostFilter"]},
              "DEFAULT": {"service_down_time": 86400}}
    with ServerProcess("memory://", config=config, workdir=tmp_path_factory.mktemp("cli-repeat")) as server:
        with server.client() as client:
            client.update_resource_stats_many(list(HOSTS.items()))
        yield server.url


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    widen(monkeypatch)




def candidates(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> set[str]:
    status, out, err = run(capsys, "select", "--dry-run", "--url", url, "-f", "json", "--limit", "100", *argv)
    if status == 1:
        return set()
    assert status == 0, err
    return {row["host"] for row in json.loads(out)}


# ------------------------------------------------------------------------------------ the parser tree


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        yield path, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}")

    yield from walk(build_parser(), "gantt")
    yield "gantt simulate", sim_cli._parser()


def _many(nargs: object) -> bool:
    return nargs in ("*", "+", argparse.REMAINDER) or (isinstance(nargs, int) and nargs > 1)


def test_no_option_of_any_command_drops_repeated_values() -> None:
    """Every option that takes several values either accumulates over repeats (extend) or refuses a repeat;
    an option of one value repeated by habit accumulates when it is a list (append)."""
    dropping = []
    for path, parser in _parsers():
        for action in parser._actions:
            if not action.option_strings or not _many(action.nargs):
                continue
            if isinstance(action, argparse._ExtendAction) or type(action).__name__ == "_Once":
                continue
            dropping.append(f"{path} {'/'.join(action.option_strings)}")
    assert dropping == []


def test_every_list_option_keeps_both_spellings_of_a_repeat() -> None:
    """``--x a --x b`` and ``--x a b`` parse to the same list, for every accumulating option of every command."""
    parser = build_parser()
    checked = 0
    for path, sub in _parsers():
        command = path.split()[1:] if path != "gantt simulate" else None
        if command is None or len(command) != 1:
            continue
        for action in sub._actions:
            if not isinstance(action, argparse._ExtendAction) or not action.option_strings:
                continue
            option = action.option_strings[-1]
            repeated = parser.parse_args([*command, option, "K1=1", option, "K2=2"])
            together = parser.parse_args([*command, option, "K1=1", "K2=2"])
            assert getattr(repeated, action.dest) == getattr(together, action.dest) == ["K1=1", "K2=2"], option
            checked += 1
    assert checked >= 8  # select's six, aggregates' --hosts and --property


def test_a_repeated_compare_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        sim_cli._parser().parse_args(["--compare", "a.toml", "b.toml", "--compare", "c.toml", "d.toml"])
    assert exc.value.code == 2 and "--compare may be given once" in capsys.readouterr().err


# ------------------------------------------------------------------------------- end to end, for real


@pytest.mark.parametrize("spelling", ["repeated", "together"])
def test_repeated_traits_are_all_required(url: str, capsys: pytest.CaptureFixture[str], spelling: str) -> None:
    args = ["--required-trait", AVX2, "--required-trait", SSD] if spelling == "repeated" \
        else ["--required-trait", AVX2, SSD]
    assert candidates(capsys, url, *args) == {"rp-both"}
    args = ["--forbidden-trait", AVX2, "--forbidden-trait", SSD] if spelling == "repeated" \
        else ["--forbidden-trait", AVX2, SSD]
    assert candidates(capsys, url, *args) == {"rp-none", "rp-gpu", "rp-gpu-fpga"}
    args = ["--extra-spec", f"trait:{AVX2}=required", "--extra-spec", f"trait:{SSD}=required"] \
        if spelling == "repeated" else ["--extra-spec", f"trait:{AVX2}=required", f"trait:{SSD}=required"]
    assert candidates(capsys, url, *args) == {"rp-both"}


def test_repeated_resources_are_all_asked(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert candidates(capsys, url, "--resource", "CUSTOM_FPGA=1", "--resource", "CUSTOM_GPU=1") == {"rp-gpu-fpga"}
    assert candidates(capsys, url, "--resource", "CUSTOM_GPU=1") == {"rp-gpu", "rp-gpu-fpga"}


def test_a_hint_given_twice_is_a_list(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with SchedulerClient(url) as client:
        for consumer, host in (("vm-on-avx", "rp-avx"), ("vm-on-ssd", "rp-ssd")):
            client.select_destinations({"flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1},
                                        "instance_uuids": [consumer], "force_hosts": [host]})
    try:
        found = candidates(capsys, url, "--hint", "different_host=vm-on-avx", "--hint", "different_host=vm-on-ssd")
        assert found == set(HOSTS) - {"rp-avx", "rp-ssd"}
        assert candidates(capsys, url, "--hint", "same_host=vm-on-ssd") == {"rp-ssd"}
    finally:
        with SchedulerClient(url) as client:
            client.release("vm-on-avx")
            client.release("vm-on-ssd")


def test_repeated_instance_uuids_are_all_placed(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "select", "--url", url, "--num-instances", "2", "--instance-uuid", "rep-1",
                           "--instance-uuid", "rep-2", "-f", "json")
    assert status == 0, err
    try:
        assert sorted(row["consumer_uuid"] for row in json.loads(out)) == ["rep-1", "rep-2"]
    finally:
        with SchedulerClient(url) as client:
            for consumer in ("rep-1", "rep-2"):
                client.release(consumer)


def test_repeated_properties_and_hosts_are_all_set(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "aggregates", "create", "rep-agg", "--hosts", "rp-avx", "--hosts", "rp-ssd", "--url",
               url)[0] == 0
    try:
        assert run(capsys, "aggregates", "set", "rep-agg", "--property", "x=1", "--property", "y=2", "--url",
                   url)[0] == 0
        status, out, _ = run(capsys, "aggregates", "show", "rep-agg", "--url", url, "-f", "json")
        shown = json.loads(out) if status == 0 else {}
        assert shown["metadata"] == {"x": "1", "y": "2"} and shown["hosts"] == ["rp-avx", "rp-ssd"]
        assert run(capsys, "aggregates", "set", "rep-agg", "--hosts", "--url", url)[0] == 0  # alone: empties
        status, out, _ = run(capsys, "aggregates", "show", "rep-agg", "--url", url, "-f", "json")
        assert status == 0 and json.loads(out)["hosts"] == []
    finally:
        run(capsys, "aggregates", "delete", "rep-agg", "--url", url)


# ------------------------------------------------------------------------------ item 4: explanations


def test_a_unit_constraint_is_the_explanation_not_short_by_zero(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "select", "--vcpus", "512", "--url", url)
    assert status == 1
    text = " ".join(err.split())
    assert "VCPU 512 can never fit: max_unit 16 < 512 asked on every node" in text
    assert "short by 0" not in text and "reason: ResourceFilter" in text
    status, out, _ = run(capsys, "select", "--vcpus", "512", "--url", url, "-f", "json")
    [miss] = json.loads(out)["error"]["explanation"]["nearest_miss"]
    assert miss["constraint"] == "max_unit 16 < 512 asked on every node"
    assert miss["best_free"] == 16 and miss["short_by"] == 496 and miss["host"] in HOSTS


def test_an_unknown_resource_class_is_named(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "select", "--resource", "CUSTOM_NOWHERE=1", "--url", url)
    assert status == 1
    assert "CUSTOM_NOWHERE 1 can never fit: no node has an inventory of CUSTOM_NOWHERE" in " ".join(err.split())


def test_the_reason_is_the_filter_that_emptied_the_list(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """ResourceFilter removes the 4 hosts without CUSTOM_GPU, TraitsFilter then the last 2: the reason is
    TraitsFilter (it emptied the list), not ResourceFilter (it removed the most)."""
    status, out, _ = run(capsys, "select", "--url", url, "-f", "json", "--resource", "CUSTOM_GPU=1",
                         "--required-trait", SSD)
    assert status == 1
    explanation = json.loads(out)["error"]["explanation"]
    removed = {s["name"]: s["removed"] for s in explanation["steps"]}
    assert removed["ResourceFilter"] == 4 and removed["TraitsFilter"] == 2
    assert explanation["reason"] == "TraitsFilter"
    status, _, err = run(capsys, "select", "--url", url, "--resource", "CUSTOM_GPU=1", "--required-trait", SSD)
    assert status == 1 and "reason: TraitsFilter" in err
