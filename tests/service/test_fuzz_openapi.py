"""Fuzzing driven by the OpenAPI document: Schemathesis generates requests for every operation the service
serves at /openapi.json, valid ones (to reach the engine and the store) and invalid ones, and sends them to a
real ``gantt serve`` on a SQLite file that serves two namespaces beside the default one (a compute and a volume
one, each seeded, so that the namespaced operations reach their engines, not only a 404). For every answer:

- never a 5xx;
- a 4xx is ``application/problem+json`` whose body names the problem (its status, a title and a detail);
- a refused request changed nothing, in any namespace: each one's store revision and every listing (hosts,
  aggregates, allocations; a volume namespace's pools and volumes) are what they were before it;
- Schemathesis's own checks: the status code, content type and body are the ones the document states.

``GANTT_FUZZ_EXAMPLES`` bounds the generated examples per operation beyond Schemathesis's fixed boundary-value
cases (default 20, sized for CI: about 9,200 requests, half of them to the two namespaces; 8 min at ``-n 0`` on
this project's 2-core machine shared with a load average of 12); the README's "Input limits" paragraph records the
last long run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.core.transport import Response
from schemathesis.hooks import HookContext

from gantt.model.namespaces import sqlite_table
from gantt.service.openapi.document import openapi
from gantt.store.sqlite import path_of
from tests.conftest import host_stats
from tests.service.server import ServerProcess

TOKEN = "fuzz-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = int(os.environ.get("GANTT_FUZZ_EXAMPLES", "20"))
CONFIG: dict[str, Any] = {
    "filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter",
                                             "ImagePropertiesFilter", "AggregateInstanceExtraSpecsFilter",
                                             "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter",
                                             "SameHostFilter", "DifferentHostFilter", "JsonFilter"]},
    # Nothing may change by itself while the test compares state: no host goes down, no claim expires.
    "DEFAULT": {"service_down_time": 10**7},
    "gantt": {"claim_timeout": 10**7, "max_body_bytes": 256 * 1024, "seed": 7},
    "namespace.blue": {"kind": "compute"},
    "namespace.blue.filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter",
                                                            "JsonFilter"]},
    "namespace.blue.DEFAULT": {"service_down_time": 10**7},
    "namespace.vol": {"kind": "volume"},
}
# Where each namespace's operations live, and what it lists (a volume namespace has no aggregates).
NAMESPACES = {"compute": ("", ("/v1/hosts", "/v1/aggregates", "/v1/allocations")),
              "blue": ("/v1/namespaces/blue", ("/hosts", "/aggregates", "/allocations")),
              "vol": ("/v1/namespaces/vol", ("/hosts", "/allocations"))}
COMPUTE = ("compute", "blue")
# Schemathesis's checks, as this service means them: schema-valid data may still be refused (nothing fits, an
# unknown host, a name with '/'), and a body over [gantt] max_body_bytes is refused with 413 before it is read.
FUZZ_CONFIG = SchemathesisConfig.from_dict({
    # Every generated request carries the token: the budget goes to the inputs, and Schemathesis's ignored_auth
    # check still sends each operation once without it (and tests/service/test_auth.py covers 401s).
    "auth": {"openapi": {"bearer": {"bearer": TOKEN}}},
    "generation": {"max-examples": EXAMPLES, "with-security-parameters": False},
    "checks": {"positive_data_acceptance": {"enabled": False},
               "negative_data_rejection": {"expected-statuses": ["400", "401", "404", "405", "409", "413",
                                                                 "415"]}},
})


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    store = tmp_path_factory.mktemp("fuzz-store") / "gantt.sqlite"
    with ServerProcess(f"sqlite:///{store}", config=CONFIG, token=TOKEN,
                       workdir=tmp_path_factory.mktemp("fuzz-server")) as server:
        _seed(server.url)
        served = httpx.get(f"{server.url}/openapi.json", headers=AUTH, timeout=30).json()
        assert served == openapi(), "the service serves another document than the one the fuzzer reads"
        yield server


# What the seed creates, by path parameter: generated paths name these half of the time (see the hook below).
KNOWN = {"host": ["c0", "c1", "c2", "bm", "node1@lvm"], "id": ["1"], "consumer": ["vm-0", "vol-0"],
         "instance": ["i-0"], "namespace": ["blue", "vol"]}
BACKEND = {"host": "node1@lvm", "capabilities": {"volume_backend_name": "lvm", "storage_protocol": "iSCSI"},
           "pools": [{"pool_name": pool, "total_capacity_gb": 1000, "free_capacity_gb": 800,
                      "allocated_capacity_gb": 150, "provisioned_capacity_gb": 300, "reserved_percentage": 5,
                      "max_over_subscription_ratio": 2.0, "thin_provisioning_support": True}
                     for pool in ("fast", "slow")]}


def _seed(url: str) -> None:
    """A small cloud the generated requests can land on, in each compute namespace: hosts in a zone, one with two
    nodes, a claim, an instance list; in the volume one, a backend with two pools and a volume on them. Sent again
    after a generated DELETE succeeded, so the names in KNOWN keep existing."""
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
        for namespace in COMPUTE:
            at = NAMESPACES[namespace][0] or "/v1"
            for name in ("c0", "c1", "c2", ["bm", "bm-n1"], ["bm", "bm-n2"]):
                http.post(f"{at}/resource-stats", json={"name": name, "stats": host_stats()}).raise_for_status()
            http.put(f"{at}/aggregates/1", json={"id": 1, "name": "az1", "hosts": ["c0", "c1"],
                                                 "metadata": {"availability_zone": "az1"}}).raise_for_status()
            http.put(f"{at}/instances/c0", json={"instances": ["i-0"]}).raise_for_status()
            claim = http.post(f"{at}/select_destinations", json={
                "flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1}, "instance_uuids": ["vm-0"]})
            assert claim.status_code in (200, 409), claim.text  # 409: generated claims filled the cloud
        at = NAMESPACES["vol"][0]
        http.post(f"{at}/resource-stats", json=BACKEND).raise_for_status()
        claim = http.post(f"{at}/select_destinations", json={"volume_id": "vol-0", "volume_properties": {"size": 10}})
        assert claim.status_code in (200, 409), claim.text  # 409: vol-0 is held already, or the pools are full


@pytest.fixture(scope="module")
def watcher(fuzz_server: ServerProcess) -> Iterator[StateWatcher]:
    with httpx.Client(base_url=fuzz_server.url, headers=AUTH, timeout=30) as http, \
            contextlib.closing(sqlite3.connect(f"file:{path_of(fuzz_server.store)}?mode=ro", uri=True,
                                               isolation_level=None)) as store:
        yield StateWatcher(http, store)


class StateWatcher:
    """What the service holds: the store's revision, read from its file (the revision /health shows is the
    replica's feed cursor, which reaches an acknowledged claim a moment later), and every listing, read through
    the API; compared around every refused request."""

    def __init__(self, http: httpx.Client, store: sqlite3.Connection) -> None:
        self.http = http
        self.store = store
        self.known = self.read()

    def read(self, listed: tuple[str, ...] = tuple(NAMESPACES)) -> dict[str, int | bytes]:
        """Every namespace's store revision (any write to a namespace moves it) and the listings of those in
        ``listed``, by name ("compute revision", "GET /v1/hosts", ...)."""
        state: dict[str, int | bytes] = {}
        for namespace, (at, lists) in NAMESPACES.items():
            meta = sqlite_table(namespace, "meta")
            state[f"{namespace} revision"] = self.store.execute(
                f"SELECT value FROM {meta} WHERE key = 'revision'").fetchone()[0]
            if namespace not in listed:
                continue
            for path in lists:
                response = self.http.get(at + path)
                response.raise_for_status()
                state[f"GET {at + path}"] = _without_clock(response.content)
        return state

    def unchanged(self, path: str) -> str | None:
        """None if the state is what it was; else which part moved. Every namespace's revision is compared, and
        the listings of the namespace ``path`` addressed (a refusal that still moved another namespace's in-memory
        state but wrote nothing is beyond what a store write could cause)."""
        parts = path.split("/")
        namespace = parts[3] if path.startswith("/v1/namespaces/") and parts[3] in NAMESPACES else "compute"
        now = self.read((namespace,))
        moved = [name for name, value in now.items() if self.known.get(name) != value]
        self.known.update(now)
        return ", ".join(moved) or None

    def refresh(self) -> None:
        self.known = self.read()

    def prune(self, keep: int = 200) -> None:
        """Past ``keep`` hosts, pools or aggregates in a namespace, delete what generated requests made there (the
        seed's stay), so that reading the state around every request stays cheap in a long run."""
        pruned = False
        for namespace, (at, lists) in NAMESPACES.items():
            body = json.loads(self.known[f"GET {at}{lists[0]}"])
            hosts = {row["host"] for row in body.get("hosts", body.get("pools", ()))}
            aggregates = ({str(a["id"]) for a in json.loads(self.known[f"GET {at}{lists[1]}"])["aggregates"]}
                          if namespace in COMPUTE else set())
            if len(hosts) + len(aggregates) <= keep:
                continue
            pruned = True
            for host in sorted(hosts - set(KNOWN["host"])):
                self.http.delete(f"{at or '/v1'}/hosts/{quote(host, safe='')}").raise_for_status()
            for aggregate in sorted(aggregates - set(KNOWN["id"])):
                self.http.delete(f"{at or '/v1'}/aggregates/{quote(aggregate, safe='')}").raise_for_status()
        if pruned:
            _seed(str(self.http.base_url))
            self.refresh()


def check_answer(response: Response, watcher: StateWatcher) -> list[str]:
    """The three properties this file is about; returns what is wrong (empty: nothing)."""
    problems: list[str] = []
    status = response.status_code
    if status >= 500:
        problems.append(f"server error {status}")
    elif status >= 400:
        media = (response.headers.get("content-type") or [""])[0].split(";")[0].strip()
        if media != "application/problem+json":
            problems.append(f"{status} answered as {media or 'no content type'}, not application/problem+json")
        else:
            try:
                body = response.json()
            except ValueError:
                body = None
            if not (isinstance(body, dict) and body.get("status") == status and body.get("title")
                    and body.get("detail")):
                problems.append(f"{status} problem body does not name the problem: {response.content[:200]!r}")
        moved = watcher.unchanged(httpx.URL(response.request.url).path)
        if moved:
            problems.append(f"refused with {status} but changed: {moved}")
    elif response.request.method != "GET":
        watcher.refresh()  # an accepted write: what it changed is the new state to compare with
        watcher.prune()
    return problems


def _declared_namespaces_only(document: dict[str, Any]) -> dict[str, Any]:
    """The document with ``{namespace}`` narrowed to the namespaces this server declares: left as the document
    states it (any name of the right shape), nearly every namespaced request was a 404 for a name nobody declared
    and never reached a namespace's engine (tests/namespaces.py checks unknown names). Negative cases still send
    other names."""
    document = json.loads(json.dumps(document))  # openapi() is cached: the service's own copy stays as served
    for item in document["paths"].values():
        for parameter in item.get("parameters", ()):
            if parameter["name"] == "namespace":
                parameter["schema"] = {"type": "string", "enum": KNOWN["namespace"]}
    return document


# The document the service serves (``fuzz_server`` checks that it serves this one), loaded at import so that
# Schemathesis makes one test per operation.
schema = schemathesis.openapi.from_dict(_declared_namespaces_only(openapi()), config=FUZZ_CONFIG)


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[tuple[str, str, int]]]:
    """Answers per operation, generation mode and status; written to $GANTT_FUZZ_REPORT (JSON) when set."""
    counts: Counter[tuple[str, str, int]] = Counter()
    start = time.monotonic()
    yield counts
    path = os.environ.get("GANTT_FUZZ_REPORT")
    if path:
        if "PYTEST_XDIST_WORKER" in os.environ:  # each worker runs some of the operations, on its own server
            path += "." + os.environ["PYTEST_XDIST_WORKER"]
        rows = [{"operation": op, "mode": mode, "status": status, "count": n}
                for (op, mode, status), n in sorted(counts.items())]
        Path(path).write_text(json.dumps({"examples": EXAMPLES, "requests": sum(counts.values()),
                                          "seconds": round(time.monotonic() - start, 1), "answers": rows},
                                         indent=1))


@schema.hook
def flatmap_path_parameters(context: HookContext, path_parameters: dict[str, Any] | None) -> st.SearchStrategy[Any]:
    """Half of the generated paths name something the seed made, so that reads, writes and deletes of real
    hosts, aggregates, allocations and instances get past the 404."""
    if not path_parameters:
        return st.just(path_parameters)
    known = {name: st.sampled_from(values) for name, values in KNOWN.items() if name in path_parameters}
    return st.one_of(st.just(path_parameters),
                     st.fixed_dictionaries(known).map(lambda names: {**path_parameters, **names}))


@schema.parametrize()
def test_openapi_fuzz(case: schemathesis.Case, fuzz_server: ServerProcess, watcher: StateWatcher,
                      tally: Counter[tuple[str, str, int]]) -> None:
    response = case.call(base_url=fuzz_server.url, timeout=30)
    mode = case.meta.generation.mode.value if case.meta is not None else "explicit"
    tally[(case.operation.label, mode, response.status_code)] += 1
    problems = check_answer(response, watcher)
    assert not problems, f"{case.as_curl_command(base_url=fuzz_server.url)}\n-> {response.status_code} " \
        f"{response.content[:500]!r}\n" + "\n".join(problems)
    if case.method == "DELETE" and response.status_code == 204:
        _seed(fuzz_server.url)
        watcher.refresh()
    case.validate_response(response)


def _without_clock(content: bytes) -> bytes:
    """A listing without what the clock moves between two reads (a node's report age), as bytes to compare."""
    body = json.loads(content)
    for host in body.get("hosts", ()):
        host.pop("last_report_seconds_ago", None)
    return json.dumps(body, sort_keys=True).encode()
