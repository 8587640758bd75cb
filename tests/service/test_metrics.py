"""``/metrics`` of a real ``gantt serve``, parsed, against what the test reported; its access and start-up lines."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gantt import __version__
from gantt.service.metrics import CLOUD_WIDE, merge, number
from gantt.store.urls import redact_url
from tests.conftest import host_stats
from tests.service.server import ServerProcess

CONFIG = {
    "filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter"],
                         "weight_classes": ["RAMWeigher", "CPUWeigher"]},
    "DEFAULT": {"service_down_time": 86400, "default_availability_zone": "home"},
    "gantt": {"seed": 7},
}

Sample = tuple[str, dict[str, str], float]
LAUNCHED: list[float] = []  # when the module's server was started, and when it first answered
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def parse(text: str) -> list[Sample]:
    """Prometheus text format 0.0.4, as much as /metrics uses: every sample's family declared by a TYPE line
    before it, labels quoted and escaped, values floats."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name not in types, f"family {name} declared twice"
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, raw_labels, value = match.groups()
        labels = dict(_LABEL.findall(raw_labels or ""))
        assert len(labels) == (raw_labels or "").count('="'), f"labels not parsed whole: {line!r}"
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family in types, f"{name} has no TYPE line before it"
        samples.append((name, labels, float(value)))
    return samples


def values(samples: list[Sample], name: str, **match: str) -> list[tuple[dict[str, str], float]]:
    return [(labels, value) for n, labels, value in samples
            if n == name and all(labels.get(k) == v for k, v in match.items())]


def value(samples: list[Sample], name: str, **match: str) -> float:
    found = values(samples, name, **match)
    assert len(found) == 1, (name, match, found)
    return found[0][1]


def scrape(url: str) -> list[Sample]:
    response = httpx.get(f"{url}/metrics")  # a new connection each time: with workers, any of them answers
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def wait_for_log(server: ServerProcess, pattern: str, timeout: float = 10.0) -> re.Match[str]:
    """The first log line matching ``pattern``: the server logs an answer after sending it, so poll."""
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(pattern, server.log_path.read_text(errors="replace"), re.M)
        if found:
            return found
        assert time.monotonic() < deadline, f"no log line matching {pattern!r}:\n{server.log_tail()}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("metrics")
    LAUNCHED[:] = [time.time()]
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", config=CONFIG, workdir=workdir,
                       log_level="info") as process:
        LAUNCHED.append(time.time())
        with process.client() as client:
            client.update_resource_stats("a1", host_stats(vcpus=16, vcpus_used=2, memory_mb=4096))
            client.update_resource_stats("a2", host_stats(vcpus=8, cpu_allocation_ratio=2.0, memory_mb=4096))
            client.update_resource_stats("b1", host_stats(vcpus=4, memory_mb=2048))
            client.update_resource_stats("off", host_stats(vcpus=100, service={"disabled": True,
                                                                               "disabled_reason": "repair"}))
            client.update_resource_stats("fenced", host_stats(vcpus=100, service={"forced_down": True}))
            client.update_aggregate({"id": 1, "name": "az1", "hosts": ["a1", "a2", "off"],
                                     "metadata": {"availability_zone": "az1"}})
        yield process


def test_hosts_capacity_and_usage_per_zone(server: ServerProcess) -> None:
    samples = scrape(server.url)
    assert {labels["state"]: v for labels, v in values(samples, "gantt_hosts")} == \
        {"up": 3, "down": 1, "disabled": 1}
    capacity = {(labels["zone"], labels["resource_class"]): v for family in ("gantt_capacity", "gantt_capacity_bytes")
                for labels, v in values(samples, family)}
    usage = {(labels["zone"], labels["resource_class"]): v for family in ("gantt_usage", "gantt_usage_bytes")
             for labels, v in values(samples, family)}
    # Only up nodes count ("off" is disabled, "fenced" down); a node in no zone is in default_availability_zone.
    assert capacity[("az1", "VCPU")] == 16 + 8 * 2 and usage[("az1", "VCPU")] == 2
    assert capacity[("home", "VCPU")] == 4 and usage[("home", "VCPU")] == 0
    # Memory and disk in bytes (issue 34 item 8: one unit per family)
    assert capacity[("az1", "MEMORY_MB")] == 8192 * 2**20 and capacity[("home", "MEMORY_MB")] == 2048 * 2**20
    assert set(capacity) == set(usage) == {(z, rc) for z in ("az1", "home") for rc in ("VCPU", "MEMORY_MB",
                                                                                       "DISK_GB")}
    assert {labels["resource_class"] for labels, _ in values(samples, "gantt_capacity")} == {"VCPU"}

    with server.client() as client:
        client.select_destinations({"flavor": {"vcpus": 4, "memory_mb": 512, "root_gb": 1},
                                    "availability_zone": "az1", "instance_uuids": ["vm-usage"]})
        samples = scrape(server.url)
        assert value(samples, "gantt_usage", zone="az1", resource_class="VCPU") == 6  # the claim, at once
        assert value(samples, "gantt_usage_bytes", zone="az1", resource_class="MEMORY_MB") == 512 * 2**20
        client.release("vm-usage")
    samples = scrape(server.url)
    assert value(samples, "gantt_usage", zone="az1", resource_class="VCPU") == 2


def _decision_figures(samples: list[Sample]) -> tuple[dict[str, float], float, float]:
    """Decisions by outcome, the decision histogram's count, and the route's answers (checked against its
    histogram's count; a route not asked yet has neither)."""
    decisions = {labels["outcome"]: v for labels, v in values(samples, "gantt_decisions_total")}
    route = "/v1/select_destinations"
    responses = sum(v for _, v in values(samples, "gantt_http_responses_total", route=route))
    assert responses == sum(v for _, v in values(samples, "gantt_http_request_seconds_count", route=route))
    assert responses == sum(v for _, v in values(samples, "gantt_http_request_seconds_bucket", route=route,
                                                 le="+Inf"))
    return decisions, value(samples, "gantt_decision_seconds_count"), responses


def test_counters_agree_with_their_histograms(server: ServerProcess) -> None:
    before, count_before, responses_before = _decision_figures(scrape(server.url))
    with httpx.Client(base_url=server.url) as http:
        statuses = []
        for i in range(4):
            statuses.append(http.post("/v1/select_destinations", json={
                "flavor": {"vcpus": 1, "memory_mb": 64, "root_gb": 1}, "instance_uuids": [f"vm-agree-{i}"]}))
        for _ in range(3):  # nothing has 1,000 vCPUs up: NoValidHost
            statuses.append(http.post("/v1/select_destinations",
                                      json={"flavor": {"vcpus": 1000, "memory_mb": 64, "root_gb": 1}}))
        # Refused before any decision (a bad body): an HTTP answer, not a decision.
        statuses.append(http.post("/v1/select_destinations", json={"flavor": {"vcpus": "many"}}))
        for i in range(4):
            http.delete(f"/v1/allocations/vm-agree-{i}")
    assert [r.status_code for r in statuses] == [200] * 4 + [409] * 3 + [400]
    after, count_after, responses_after = _decision_figures(scrape(server.url))
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert grew == {"placed": 4, "no_valid_host": 3}
    assert count_after - count_before == 7 == sum(after.values()) - sum(before.values())
    assert sum(after.values()) == count_after
    assert responses_after - responses_before == 8
    samples = scrape(server.url)
    assert value(samples, "gantt_decision_seconds_bucket", le="+Inf") == value(samples, "gantt_decision_seconds_count")


def test_build_process_and_worker_figures(server: ServerProcess) -> None:
    samples = scrape(server.url)
    own = [(name, labels) for name, labels, _ in samples
           if re.sub(r"_(bucket|sum|count)$", "", name) not in CLOUD_WIDE]
    assert all(labels.get("worker") == "0" for _, labels in own), "one process: worker 0"
    assert not any("worker" in labels for name, labels, _ in samples if name in CLOUD_WIDE)
    assert not any("pid" in labels for name, labels, _ in samples if name != "gantt_worker_info")
    [(build, one)] = values(samples, "gantt_build_info")
    assert one == 1 and build["version"] == __version__ and re.fullmatch(r"3\.\d+\.\d+\S*", build["python"])
    [(info, _)] = values(samples, "gantt_worker_info")
    pid = int(info["pid"])
    assert pid == httpx.get(f"{server.url}/health").json()["pid"]
    # Between the fixture's launching the server and its first answer (the kernel's boot time is whole seconds).
    assert LAUNCHED[0] - 1.5 <= value(samples, "process_start_time_seconds") <= LAUNCHED[1]
    assert value(samples, "process_cpu_seconds_total") > 0
    assert value(samples, "process_resident_memory_bytes") > 10 * 2**20  # numpy and the replica at least
    assert value(samples, "process_virtual_memory_bytes") >= value(samples, "process_resident_memory_bytes")
    assert 3 <= value(samples, "process_open_fds") < value(samples, "process_max_fds")


def test_access_log_and_startup_line(server: ServerProcess) -> None:
    response = httpx.post(f"{server.url}/v1/select_destinations",
                          json={"flavor": {"vcpus": 1000, "memory_mb": 64, "root_gb": 1}})
    assert response.status_code == 409
    request_id = response.headers["x-openstack-request-id"]
    line = wait_for_log(server, rf"^.* gantt\.access INFO POST /v1/select_destinations 409 ([0-9.]+)ms "
                                rf"{re.escape(request_id)}$")
    assert float(line.group(1)) > 0
    assert httpx.get(f"{server.url}/v1/hosts/nowhere").status_code == 404
    wait_for_log(server, r"^.* gantt\.access INFO GET /v1/hosts/nowhere 404 [0-9.]+ms req-[0-9a-f-]{36}$")

    startup = wait_for_log(server, r"^gantt: config (.*)$").group(0)
    assert f"config {server.config_path};" in startup
    assert f"store {server.store};" in startup
    # the enabled filters after the request filters that always run, then the weighers, in the config's order
    assert startup.endswith("ComputeFilter, AvailabilityZoneFilter, ComputeCapabilitiesFilter; "
                            "weighers RAMWeigher, CPUWeigher")


def test_merged_expositions_declare_each_family_once() -> None:
    first = '# HELP a A.\n# TYPE a counter\na{worker="0"} 1\n# HELP b B.\n# TYPE b gauge\nb{worker="0"} 2\n'
    second = '# HELP a A.\n# TYPE a counter\na{worker="1"} 3\n# HELP c C.\n# TYPE c gauge\nc{worker="1"} 4\n'
    merged = merge([first, second])
    assert merged.splitlines() == ["# HELP a A.", "# TYPE a counter", 'a{worker="0"} 1', 'a{worker="1"} 3',
                                   "# HELP b B.", "# TYPE b gauge", 'b{worker="0"} 2',
                                   "# HELP c C.", "# TYPE c gauge", 'c{worker="1"} 4']
    assert [name for name, _, _ in parse(merged)] == ["a", "a", "b", "c"]


def test_store_urls_are_shown_without_credentials() -> None:
    assert redact_url("etcd://admin:s3cret@10.0.0.1:2379,10.0.0.2:2379/gantt?budget=2&password=s3cret") == \
        "etcd://***@10.0.0.1:2379,10.0.0.2:2379/gantt?budget=2&password=***"
    assert redact_url("sqlite:///var/lib/gantt/gantt.sqlite") == "sqlite:///var/lib/gantt/gantt.sqlite"
    assert redact_url("etcd://h:2379?Token=abc&timeout=1") == "etcd://h:2379?Token=***&timeout=1"


def test_every_worker_answers_for_all_and_keeps_its_label_across_a_restart(tmp_path: Path) -> None:
    with ServerProcess(f"sqlite:///{tmp_path}/w.sqlite", config=CONFIG, workers=2, workdir=tmp_path) as server:
        pids = _worker_pids(server.url, {"0", "1"})
        assert pids["0"] != pids["1"]
        printed = wait_for_log(server, r"with 2 workers \(pids (\d+), (\d+)\)")
        assert {int(pid) for pid in printed.groups()} == set(pids.values())

        # Whichever worker answers, no worker's counter goes backwards from one scrape to the next.
        last: dict[tuple[str, str], float] = {}
        for _ in range(12):
            httpx.get(f"{server.url}/v1/hosts")
            for _, labels, number in scrape(server.url):
                if "route" in labels and "status" in labels:
                    key = (labels["worker"], labels["route"] + labels["status"])
                    assert number >= last.get(key, 0), key
                    last[key] = number
        # which worker accepts each request is the kernel's choice: one may serve all twelve
        assert last and {worker for worker, _ in last} <= {"0", "1"}

        os.kill(pids["1"], signal.SIGKILL)
        # The supervisor starts a new process as worker 1: a new pid under the same label.
        deadline = time.monotonic() + 30
        while (again := _worker_pids(server.url, {"0", "1"}))["1"] == pids["1"]:
            assert time.monotonic() < deadline, "worker 1 was not restarted"
            time.sleep(0.05)
        assert again["0"] == pids["0"]


def _worker_pids(url: str, wanted: set[str], timeout: float = 30.0) -> dict[str, int]:
    """Worker label -> pid, from one scrape that shows every ``wanted`` worker (a worker's figures reach the
    others within a few seconds of its start)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            samples = scrape(url)
        except httpx.TransportError:  # a worker killed with this connection in its backlog
            samples = []
        seen = {labels["worker"]: int(labels["pid"]) for labels, _ in values(samples, "gantt_worker_info")}
        if wanted <= set(seen):
            for name, labels, _ in samples:  # every worker's series under a worker that names its process
                if name not in CLOUD_WIDE:
                    assert labels["worker"] in seen
            return seen
        assert time.monotonic() < deadline, f"only workers {sorted(seen)} answered"
        time.sleep(0.05)  # polling: leave the CPU to a worker that is starting


# ------------------------------------------------------------------------- issue 34 item 8


def test_amounts_are_exact_in_base_units() -> None:
    """27,197,440 MiB was printed 2.71974e+07 (%g keeps 6 digits), in a family mixing MiB, GiB and counts."""
    assert number(27197440.0) == "27197440" and number(28518582763520) == "28518582763520"
    assert number(0.1 + 0.2) == repr(0.1 + 0.2) and float(number(1234567.125)) == 1234567.125
    with ServerProcess("memory://", config={"DEFAULT": {"service_down_time": 86400}}) as server:
        server.start()
        with server.client() as client:
            client.update_resource_stats("big", host_stats(vcpus=1234567, memory_mb=27197440, local_gb=123457,
                                                           cpu_allocation_ratio=1.5))
        text = httpx.get(f"{server.url}/metrics").text
    zone = 'zone="nova"'
    assert f'gantt_capacity_bytes{{{zone},resource_class="MEMORY_MB"}} {27197440 * 2**20}\n' in text
    assert f'gantt_capacity_bytes{{{zone},resource_class="DISK_GB"}} {123457 * 2**30}\n' in text
    assert f'gantt_capacity{{{zone},resource_class="VCPU"}} {number(1234567 * 1.5)}\n' in text
    assert "e+" not in "".join(line for line in text.splitlines() if line.startswith("gantt_"))


def test_cloud_figures_are_given_once_under_several_workers(tmp_path: Path) -> None:
    """With --workers 2, sum(gantt_hosts) counted every node twice (each worker's copy had its own label)."""
    with ServerProcess(f"sqlite:///{tmp_path}/w.sqlite", config=CONFIG, workers=2, workdir=tmp_path) as server:
        server.start()
        with server.client() as client:
            for name in ("c1", "c2", "c3"):
                client.update_resource_stats(name, host_stats(vcpus=8, memory_mb=1024))
        _worker_pids(server.url, {"0", "1"})  # both workers' figures are in the answer
        deadline = time.monotonic() + 30
        while True:
            samples = scrape(server.url)  # parse() refuses a family declared twice
            if sum(v for _, v in values(samples, "gantt_hosts")) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert sum(v for _, v in values(samples, "gantt_hosts")) == 3
    assert [labels for labels, _ in values(samples, "gantt_hosts", state="up")] == [{"state": "up"}]
    assert sum(v for _, v in values(samples, "gantt_capacity", resource_class="VCPU")) == 3 * 8  # once, not twice
    assert len(values(samples, "gantt_allocations")) == 1
    # A worker's own figures keep their label, one series per worker.
    assert {labels["worker"] for labels, _ in values(samples, "gantt_replica_revision")} == {"0", "1"}


def test_replica_lag_is_revisions_not_yet_applied(tmp_path: Path) -> None:
    """gantt_replica_lag_seconds was the time since the feed was last read. The lag is what the store holds that
    the replica has not applied: here a replica that does not follow, while another writes."""
    from gantt.config import Config
    from gantt.replication.replica import Replica
    from gantt.service.metrics import Metrics
    from gantt.store.urls import open_store

    url = f"sqlite:///{tmp_path}/lag.sqlite"
    writer = Replica(open_store(url), Config()).start_owning(follow=False)
    reader = Replica(open_store(url), Config()).start_owning(follow=False)
    try:
        metrics = Metrics(0)
        text = metrics.render(reader)
        assert 'gantt_replica_revisions_behind{worker="0"} 0\n' in text
        assert "gantt_replica_lag_seconds" not in text
        for i in range(3):
            writer.update_resource_stats(f"n{i}", host_stats(vcpus=4))
        behind = writer.revision - reader.revision
        assert behind >= 3
        assert f'gantt_replica_revisions_behind{{worker="0"}} {behind}\n' in metrics.render(reader)
        reader.sync()
        assert 'gantt_replica_revisions_behind{worker="0"} 0\n' in metrics.render(reader)
    finally:
        writer.close()
        reader.close()
