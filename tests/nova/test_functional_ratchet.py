"""Nova 34's own functional tests with Gantt swapped in (``python -m gantt.nova.functional``), as a ratchet.

``functional_passing.txt`` lists, per mode, the tests known to pass with Gantt: ``placement`` (Gantt's Placement
face in place of Placement, Nova's scheduler deciding) and ``gantt`` (Gantt's scheduler manager too). CI runs the
few of them named in ``CI_SUBSET`` (one stestr worker, about a minute on a quiet machine) and fails if any fails or
does not run; the whole list is run by hand (see docs/nova.md), and a run's passes are added to it with

    python -m tests.nova.test_functional_ratchet --update MODE [WORKDIR ...]

which reads the last stestr run in each WORKDIR (by default the mode's, ``~/.cache/gantt/nova-functional/MODE``)
and keeps what the list holds already. ``--table WORKDIR`` prints that run's figures per module for the README,
counting apart the failures no scheduler but Nova's own can pass (``tied_to_novas_scheduler``).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest

from tests.nova.venv import python_or_skip

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
PASSING = HERE / "functional_passing.txt"
# A boot across hosts, a move, a server group, aggregates mirrored into Placement, a provider tree's traits and
# inventory: each asks Gantt's Placement face something different.
CI_SUBSET = [
    "nova.tests.functional.test_json_filter.JsonFilterTestCase.test_filter_on_hypervisor_hostname",
    "nova.tests.functional.test_cold_migrate.ColdMigrationDisallowSameHost.test_cold_migrate_same_host_old_compute_disallow",
    "nova.tests.functional.test_server_group.ServerGroupAntiAffinityConfTest.test_anti_affinity_no_filter",
    "nova.tests.functional.test_scheduler.AggregateImagePropertiesIsolationTestCase.test_filter_rejects",
    "nova.tests.functional.test_servers_provider_tree.TraitsTrackingTests.test_resource_provider_traits",
]
# With Gantt's scheduler too: a boot across hosts with JsonFilter, server-group anti-affinity, an unshelve to a host
# under an availability zone, a cold migration, a resize that stays on its host, traits from Placement deciding.
GANTT_CI_SUBSET = [
    "nova.tests.functional.test_json_filter.JsonFilterTestCase.test_filter_on_hypervisor_hostname",
    "nova.tests.functional.test_server_group.ServerGroupAntiAffinityConfTest.test_anti_affinity_no_filter",
    "nova.tests.functional.test_availability_zones.TestAvailabilityZoneScheduling"
    ".test_unshelve_to_host_and_wrong_az_a_server_with_az_constraint",
    "nova.tests.functional.test_cold_migrate.ColdMigrationDisallowSameHost.test_cold_migrate_same_host_old_compute_disallow",
    "nova.tests.functional.test_servers.ServerMovingTests.test_resize_confirm_same_host",
    "nova.tests.functional.test_servers_provider_tree.TraitsTrackingTests.test_resource_provider_traits",
]
RESULT = re.compile(r"^\{\d+\} (?P<test>\S+) \[[^\]]*\] \.\.\. (?P<status>ok|FAILED|SKIPPED.*)$")


def known() -> dict[str, set[str]]:
    """mode -> the tests listed as passing in it."""
    out: dict[str, set[str]] = {}
    for line in PASSING.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            mode, test = line.split()
            out.setdefault(mode, set()).add(test)
    return out


def run(python: Path, mode: str, tests: list[str], workdir: Path,
        swap: str | None = None) -> tuple[dict[str, str], str]:
    """Run ``tests`` in ``mode`` with one worker: (test id -> ok / FAILED / SKIPPED…, as stestr printed them; its
    output)."""
    listed = workdir / "tests.txt"
    listed.write_text("".join(f"{test}\n" for test in tests))
    flags = {"reference": ["--reference"], "placement": ["--placement-only"], "gantt": []}[mode]
    if swap is not None:
        flags.append(f"--swap={swap}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(SRC)  # the tree under test, never an installed Gantt
    done = subprocess.run([str(python), "-m", "gantt.nova.functional", *flags, "--workdir", str(workdir / mode),
                           "--concurrency", "1", "--load-list", str(listed)],
                          capture_output=True, text=True, env=env, timeout=900)
    results = {m["test"]: m["status"] for line in done.stdout.splitlines() if (m := RESULT.match(line))}
    if not results:
        raise AssertionError(f"no test ran (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    return results, done.stdout


@pytest.mark.timeout(900)
def test_nova_functional_subset_passes_with_gantts_placement(tmp_path: Path) -> None:
    assert set(CI_SUBSET) <= known()["placement"], "the CI subset must be tests the ratchet lists"
    results, output = run(python_or_skip(), "placement", CI_SUBSET, tmp_path)
    assert results == dict.fromkeys(CI_SUBSET, "ok"), (results, output[-6000:])


@pytest.mark.timeout(900)
def test_nova_functional_subset_passes_with_gantts_scheduler(tmp_path: Path) -> None:
    """Gantt decides and claims (Nova's own scheduling code would fail the test), on the store its Placement face
    serves."""
    assert set(GANTT_CI_SUBSET) <= known()["gantt"], "the CI subset must be tests the ratchet lists"
    results, output = run(python_or_skip(), "gantt", GANTT_CI_SUBSET, tmp_path)
    assert results == dict.fromkeys(GANTT_CI_SUBSET, "ok"), (results, output[-6000:])


@pytest.mark.timeout(900)
def test_the_guard_fails_a_test_in_which_novas_own_scheduler_decides(tmp_path: Path) -> None:
    """The proof that Gantt decides rests on Nova's scheduling code failing the test that calls it: with that
    guard on and Nova's own scheduler still deciding, a boot must fail, and say why."""
    results, output = run(python_or_skip(), "placement", CI_SUBSET[:1], tmp_path, swap="placement,forbid")
    assert results == {CI_SUBSET[0]: "FAILED"}, results
    assert "Nova's own scheduling code ran while Gantt schedules" in output
    assert "nova.scheduler.manager.SchedulerManager.select_destinations" in output


# Runs in Nova's environment, whose test libraries read subunit (Gantt's own environment does not have them): one
# JSON object per test, its id, status, traceback and, for a failure, whether the test method itself patches Nova's
# own scheduling code (its source, decorators included, names it): its filters, weighers, HostManager, manager, or
# the claim its manager makes in Placement after filtering.
_READ_RUN = """
import importlib, inspect, json, re, sys
import subunit, testtools
out = []
def patches_scheduler(test_id):
    path, _, method = re.sub(r"[(\\[].*$", "", test_id).rpartition(".")
    module, _, cls = path.rpartition(".")
    try:
        source = inspect.getsource(getattr(getattr(importlib.import_module(module), cls), method))
    except (ImportError, AttributeError, OSError, TypeError):
        return False
    return bool(re.search(r"nova\\.scheduler\\.(filters|host_manager|weights|manager|utils\\.claim_resources)", source))
def keep(test):
    details = test["details"]
    out.append({"test": test["id"], "status": test["status"],
                "traceback": details["traceback"].as_text() if "traceback" in details else "",
                "patches_scheduler": test["status"] == "fail" and patches_scheduler(test["id"])})
result = testtools.StreamToDict(keep)
result.startTestRun()
subunit.ByteStreamToStreamResult(sys.stdin.buffer, non_subunit_name="stdout").run(result)
result.stopTestRun()
json.dump(out, sys.stdout)
"""


class RunRow(TypedDict):
    test: str
    status: str  # subunit's: success, fail, skip…
    traceback: str
    patches_scheduler: bool


def last_run(python: Path, workdir: Path) -> list[RunRow]:
    """Each test of the last stestr run of ``python -m gantt.nova.functional --workdir WORKDIR``: its ``test`` id,
    ``status`` (success, fail, skip…) and ``traceback``."""
    stream = _tool([str(python), "-m", "stestr", "--config", str(workdir / ".stestr.conf"), "last", "--subunit"],
                   cwd=workdir)
    read = subprocess.run([str(python), "-c", _READ_RUN], input=stream, cwd=workdir, capture_output=True, check=True)
    rows: list[RunRow] = json.loads(read.stdout)
    return rows


def last_passes(python: Path, workdir: Path) -> set[str]:
    """The tests that passed in the last stestr run in ``workdir``."""
    return {row["test"] for row in last_run(python, workdir) if row["status"] == "success"}


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in \S+\s*\n\s*(?P<code>.+)$', re.MULTILINE)
# What a test reads of Nova's own scheduler: the filter it wraps in a mock (NUMA, PCI) or the hosts its spy on
# HostManager kept (aggregates).
_READS_NOVAS_SCHEDULER = re.compile(r"mock_filter|filtered_hosts")


def tied_to_novas_scheduler(row: RunRow) -> bool:
    """Whether a failure is one no scheduler but Nova's own can pass: the test patches Nova's scheduling code, or
    it failed at an assert on what that code did (the last frame in a test module of its traceback)."""
    if row["patches_scheduler"]:
        return True
    frames = [m for m in _FRAME.finditer(row["traceback"]) if Path(m["file"]).name.startswith("test_")]
    return bool(frames) and bool(_READS_NOVAS_SCHEDULER.search(frames[-1]["code"]))


def module_of(test: str) -> str:
    """``test_servers`` or ``libvirt.test_numa_servers``: the test id's path below ``nova.tests.functional``, up to
    its class."""
    parts = test.removeprefix("nova.tests.functional.").split(".")
    return ".".join(itertools.takewhile(lambda part: not part[:1].isupper(), parts))


def table(rows: list[RunRow]) -> str:
    """A run's figures per module, as the README's table wants them."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row in rows:
        status = {"success": "pass", "skip": "skip"}.get(row["status"], "fail")
        counts[module_of(row["test"])][status] += 1
        if status == "fail" and tied_to_novas_scheduler(row):
            counts[module_of(row["test"])]["tied"] += 1
    lines = ["| module | ran | pass | fail | of which tied to Nova's own scheduler | skipped |",
             "| --- | --- | --- | --- | --- | --- |"]
    for module in sorted(counts):
        c = counts[module]
        lines.append(f"| {module} | {c.total() - c['tied']} | {c['pass']} | {c['fail']} | {c['tied']} | {c['skip']} |")
    return "\n".join(lines)


def _tool(command: list[str], *, cwd: Path | None = None, stdin: bytes | None = None) -> bytes:
    """Its output; both tools exit 1 when the run they read had a failure, which is what a run to learn from
    has: only another status is an error."""
    done = subprocess.run(command, cwd=cwd, input=stdin, capture_output=True)
    if done.returncode not in (0, 1) or not done.stdout:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return done.stdout


def update(mode: str, workdirs: list[Path]) -> None:
    from gantt.nova.functional.__main__ import default_workdir

    python = python_or_skip()
    listed = known()
    for workdir in workdirs or [default_workdir(mode)]:
        listed.setdefault(mode, set()).update(last_passes(python, workdir))
    lines = [f"{m} {test}\n" for m in sorted(listed) for test in sorted(listed[m])]
    PASSING.write_text("# Nova 34 functional tests that pass with Gantt swapped in (mode test_id); see "
                       "test_functional_ratchet.py\n" + "".join(lines))
    print(f"{len(listed[mode])} {mode} tests listed in {PASSING}")


if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "--update":
    update(sys.argv[2], [Path(p) for p in sys.argv[3:]])
if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--table":
    print(table(last_run(python_or_skip(), Path(sys.argv[2]))))


_PROBE = """import unittest
from unittest import mock


class Probe(unittest.TestCase):
    def setUp(self):
        self.mock_filter = mock.Mock()

    def test_passes(self):
        pass

    def test_fails(self):
        self.fail('on purpose')

    def test_reads_novas_filter(self):
        self.assertTrue(self.mock_filter.called)

    @mock.patch('nova.scheduler.filters.affinity_filter.ServerGroupAffinityFilter.host_passes', return_value=True)
    def test_patches_novas_filter(self, host_passes):
        self.fail('a violation was expected to reach the compute')

    @unittest.skip('on purpose')
    def test_skipped(self):
        pass
"""


def test_last_run_reads_a_run_with_failures_and_counts_apart_those_tied_to_novas_scheduler(tmp_path: Path) -> None:
    """A run with a failure is what ``--update`` and ``--table`` read most (stestr then exits 1); a failure at an
    assert on Nova's filter mock, or in a test patching Nova's filter, is counted apart, an ordinary one not."""
    python = python_or_skip()
    (tmp_path / "probe_tests").mkdir()
    (tmp_path / "probe_tests" / "__init__.py").write_text("")
    (tmp_path / "probe_tests" / "test_probe.py").write_text(_PROBE)
    (tmp_path / ".stestr.conf").write_text("[DEFAULT]\ntest_path=./probe_tests\ntop_dir=./\n")
    run = subprocess.run([str(python), "-m", "stestr", "run"], cwd=tmp_path, capture_output=True)
    assert run.returncode == 1, run.stdout.decode()[-2000:]
    probe = "probe_tests.test_probe.Probe."
    assert last_passes(python, tmp_path) == {probe + "test_passes"}
    rows = {row["test"].removeprefix(probe): row for row in last_run(python, tmp_path)}
    assert {name: tied_to_novas_scheduler(row) for name, row in rows.items() if row["status"] == "fail"} == {
        "test_fails": False, "test_reads_novas_filter": True, "test_patches_novas_filter": True}
    assert table(list(rows.values())).splitlines()[-1] == "| probe_tests.test_probe | 5 | 1 | 3 | 2 | 1 |"


def test_module_of_a_test_id() -> None:
    assert module_of("nova.tests.functional.libvirt.test_numa_servers.NUMAServersTest.test_x") == \
        "libvirt.test_numa_servers"
    assert module_of("nova.tests.functional.test_servers.ServersTest.test_y(ddt_case)") == "test_servers"
