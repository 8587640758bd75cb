"""Property: malformed input at every write endpoint gets a 4xx problem, never a 5xx, and changes nothing.

Bodies are generated to be invalid for sure: junk and truncated JSON, wrong top-level shapes, unknown fields,
missing required fields, and values of the wrong type or out of range (including integers beyond int64) at known
fields. After thousands of them the store revision and a full listing (hosts, aggregates, allocations) are what
they were, the catch-all handler never ran, and the server still answers.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import host_stats
from tests.service.conftest import CONFIG
from tests.service.server import ServerProcess

HOST = "fuzz-host"
STATS = host_stats(vcpus=8)
SPEC = {"flavor": {"name": "f", "vcpus": 1, "memory_mb": 64, "root_gb": 1, "extra_specs": {}},
        "project_id": "p", "instance_uuids": ["fuzz-vm"], "force_hosts": [HOST]}

INT64 = 2**63 - 1
huge = st.one_of(st.integers(min_value=INT64 + 1, max_value=10**40), st.integers(min_value=-(10**40), max_value=-1))
not_json_int = st.one_of(st.text(max_size=8), st.booleans(), st.lists(st.integers(), max_size=2),
                         st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                         st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)))
bad_count = st.one_of(not_json_int, huge)  # for fields that must be a non-negative int
not_str = st.one_of(st.integers(), st.booleans(), st.lists(st.text(max_size=3), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))
not_str_list = st.one_of(st.text(max_size=5), st.integers(), st.lists(st.integers(), min_size=1, max_size=3),
                         st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))
not_object = st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2))
bad_ratio = st.one_of(st.text(min_size=1, max_size=5), st.lists(st.integers(), max_size=2),
                      st.floats(max_value=0.0, allow_nan=False, allow_infinity=False))
bad_name = st.one_of(st.integers(), st.booleans(), st.just(""), st.text(min_size=256, max_size=300),
                     st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
                     st.lists(st.text(min_size=1, max_size=5), min_size=0, max_size=1),
                     st.lists(st.text(min_size=1, max_size=5), min_size=3, max_size=4),
                     st.tuples(st.text(min_size=1, max_size=4), st.integers()).map(list))


# Per endpoint: a valid body, its required top-level keys, and (path, strategy of invalid values) pairs.
ENDPOINTS: dict[str, dict[str, Any]] = {
    "report": {
        "method": "POST", "path": "/v1/resource-stats", "body": {"name": HOST, "stats": STATS},
        "required": ["name", "stats"], "objects": [(), ("stats",)],
        "fields": [
            (("name",), bad_name), (("stats",), not_object), (("stats", "vcpus"), bad_count),
            (("stats", "memory_mb"), bad_count), (("stats", "vcpus_used"), bad_count),
            (("stats", "cpu_allocation_ratio"), bad_ratio), (("stats", "traits"), not_str_list),
            (("stats", "traits"), st.just(["lower-case"])), (("stats", "instances"), not_str_list),
            (("stats", "inventories"), st.one_of(not_object, st.just({"NOT_A_CLASS": {"total": 1}}),
                                                 st.just({"VCPU": {"total": -1}}),
                                                 st.just({"VCPU": {"total": 4, "zz": 1}}),
                                                 st.just({"VCPU": {"reserved": 1}}))),
            (("stats", "service"), st.one_of(not_object, st.just({"disabled": "yes"}))),
            (("stats", "hypervisor_version"), st.one_of(not_json_int, huge.filter(lambda v: v > 0))),
        ],
    },
    "batch": {
        "method": "POST", "path": "/v1/resource-stats/batch",
        "body": {"reports": [{"name": HOST, "stats": STATS}, {"name": [HOST, "n2"], "stats": STATS}]},
        "required": ["reports"], "objects": [(), ("reports", 0), ("reports", 1, "stats")],
        "fields": [
            (("reports",), not_str_list.filter(lambda v: v != [])), (("reports", 1, "name"), bad_name),
            (("reports", 0, "stats", "local_gb"), bad_count), (("reports", 1), not_object),
        ],
    },
    "aggregate": {
        "method": "PUT", "path": "/v1/aggregates/fuzz-agg",
        "body": {"id": "fuzz-agg", "name": "a", "hosts": [HOST], "metadata": {"availability_zone": "z"}},
        "required": ["id"], "objects": [()],
        "fields": [
            (("id",), st.one_of(st.booleans(),
                                st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)),
                                st.lists(st.integers(), max_size=2), st.just(""),
                                st.text(min_size=1, max_size=5).filter(lambda s: s != "fuzz-agg"))),
            (("hosts",), not_str_list), (("metadata",), st.one_of(not_object, st.just({"k": 1}))),
            (("name",), not_str.filter(lambda v: not isinstance(v, str))),
        ],
    },
    "select": {
        "method": "POST", "path": "/v1/select_destinations", "body": SPEC,
        "required": ["flavor"], "objects": [(), ("flavor",)],
        "fields": [
            (("flavor",), not_object), (("flavor", "vcpus"), bad_count), (("flavor", "memory_mb"), bad_count),
            (("flavor", "extra_specs"), st.one_of(not_object, st.just({"k": 1}))),
            (("num_instances",), st.one_of(not_json_int, huge, st.integers(min_value=1001), st.just(0))),
            (("instance_uuids",), st.one_of(not_str_list, st.just(["a", "a"]))),
            (("resources",), st.one_of(not_object, st.just({"lowercase": 1}), st.just({"VCPU": -1}),
                                       st.just({"VCPU": "x"}), st.just({"CUSTOM_X": 10**30}))),
            (("availability_zone",), not_str), (("scheduler_hints",), not_object),
            (("force_hosts",), not_str_list), (("project_id",), not_str),
            (("instance_group",), st.one_of(not_object, st.just({"policy": "sideways"}),
                                            st.just({"policies": ["sideways"]}),
                                            st.just({"rules": {"max_server_per_host": 0}}))),
            (("requested_destination",), st.one_of(not_object, st.just({"host": 1}))),
        ],
    },
    "candidates": {
        "method": "POST", "path": "/v1/candidates", "body": SPEC, "required": ["flavor"],
        "objects": [(), ("flavor",)],
        "fields": [(("flavor", "vcpus"), bad_count), (("num_instances",), st.just(0)),
                   (("image",), st.one_of(not_object, st.just({"properties": []})))],
    },
    "instances-add": {
        "method": "POST", "path": f"/v1/instances/{HOST}", "body": {"instances": ["i-1"]},
        "required": ["instances"], "objects": [()], "fields": [(("instances",), not_str_list)],
    },
    "instances-sync": {
        "method": "PUT", "path": f"/v1/instances/{HOST}", "body": {"instances": ["i-1"]},
        "required": ["instances"], "objects": [()], "fields": [(("instances",), not_str_list)],
    },
}


def _set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    body = copy.deepcopy(body)
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


def _get(body: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        body = body[key]
    return body


def _invalid_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def bodies(spec: dict[str, Any]) -> st.SearchStrategy[bytes]:
    base = spec["body"]
    raw = json.dumps(base).encode()
    junk = st.one_of(
        st.integers(min_value=0, max_value=len(raw) - 1).map(lambda k: raw[:k]),  # truncated: never valid
        st.text(max_size=40).filter(_invalid_json).map(str.encode),
        st.binary(max_size=40).map(lambda b: b"{\xff" + b),  # not UTF-8
        st.sampled_from([b"", b"null", b"[]", b"{}", b"NaN", b'{"a":1,}', b"\"\\ud800\"", b"[" * 5000]),
    )
    shape = not_object.map(lambda v: json.dumps(v).encode())
    unknown = st.tuples(st.sampled_from(spec["objects"]), st.text(min_size=1, max_size=8)).map(
        lambda pair: _set(base, (*pair[0], "zz_" + pair[1]), 1))
    missing = st.sampled_from(spec["required"]).map(lambda key: {k: v for k, v in base.items() if k != key})
    wrong = st.one_of(*(values.map(lambda v, p=path: _set(base, p, v)) for path, values in spec["fields"]))
    return st.one_of(junk, shape, st.one_of(unknown, missing, wrong).map(lambda b: json.dumps(b).encode()))


def _state(http: httpx.Client) -> tuple[Any, ...]:
    health = http.get("/health").json()
    listing = tuple(http.get(path).json() for path in ("/v1/hosts", "/v1/aggregates", "/v1/allocations"))
    for host in listing[0]["hosts"]:
        del host["last_report_seconds_ago"]  # the clock's, not the state's: it grows between two reads
    return (health["revision"], *listing)


def _unhandled(http: httpx.Client) -> int:
    match = re.search(r"^gantt_http_unhandled_total\{[^}]*\} (\d+)$", http.get("/metrics").text, re.M)
    assert match is not None
    return int(match.group(1))


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        client.post("/v1/resource-stats", json={"name": HOST, "stats": STATS}).raise_for_status()
        client.put("/v1/aggregates/fuzz-existing", json={"id": "fuzz-existing", "hosts": [HOST]}).raise_for_status()
        yield client


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_malformed_requests_are_4xx_and_change_nothing(http: httpx.Client, name: str) -> None:
    spec = ENDPOINTS[name]
    before = _state(http)
    unhandled = _unhandled(http)
    statuses: set[int] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture])
    @given(body=bodies(spec))
    def check(body: bytes) -> None:
        response = http.request(spec["method"], spec["path"], content=body,
                                headers={"content-type": "application/json"})
        assert 400 <= response.status_code < 500, (body[:200], response.status_code, response.text[:300])
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["status"] == response.status_code and problem["detail"]
        statuses.add(response.status_code)

    check()
    assert statuses == {400}
    assert _state(http) == before
    assert _unhandled(http) == unhandled
    assert http.get("/health").status_code == 200


def test_a_valid_body_still_works_after_the_fuzzing(http: httpx.Client) -> None:
    """The templates are valid: what the fuzzer mutates is exactly one thing away from an accepted request."""
    for name, spec in ENDPOINTS.items():
        if name == "candidates":
            continue
        response = http.request(spec["method"], spec["path"], json=spec["body"])
        assert response.status_code == 200, (name, response.text)
    assert http.post("/v1/candidates", json=SPEC).status_code == 200
    assert _get(ENDPOINTS["select"]["body"], ("flavor", "vcpus")) == 1


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(),
                                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                           max_leaves=6)
HINTS = ["same_host", "different_host", "group", "query", "build_near_host_ip", "cidr", "target_cell"]
IMAGE_PROPERTIES = ["hw_architecture", "img_hv_type", "hw_vm_mode", "img_hv_requested_version",
                    "hypervisor_version_requires", "os_type"]
EXTRA_SPECS = ["capabilities:cpu_info:features", "hw:cpu_policy", "vcpus", "aggregate_instance_extra_specs:k",
               "resources:VCPU", "trait:HW_CPU_X86_AVX"]


@pytest.mark.parametrize("field", ["scheduler_hints", "image", "extra_specs"])
def test_free_form_fields_never_reach_the_catch_all(http: httpx.Client, field: str) -> None:
    """Hints, image properties and extra specs are free-form: filters interpret them and must answer 200 or a 4xx."""
    before = _state(http)
    unhandled = _unhandled(http)
    if field == "scheduler_hints":
        values = st.dictionaries(st.sampled_from(HINTS), json_values, min_size=1, max_size=3)
    elif field == "image":
        values = st.dictionaries(st.sampled_from(IMAGE_PROPERTIES), json_values, min_size=1, max_size=3).map(
            lambda props: {"properties": props})
    else:
        values = st.dictionaries(st.sampled_from(EXTRA_SPECS), st.text(max_size=12), min_size=1, max_size=3)

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(value=values)
    def check(value: Any) -> None:
        spec = _set(SPEC, ("flavor", "extra_specs") if field == "extra_specs" else (field,), value)
        response = http.post("/v1/candidates", json=spec)
        assert response.status_code in (200, 400), (value, response.status_code, response.text[:300])

    check()
    assert _state(http) == before
    assert _unhandled(http) == unhandled


DEEP = b"[" * 20_000 + b"]" * 20_000  # under the test server's 64 KiB body limit


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/select_destinations", b'{"flavor": {"vcpus": 1, "memory_mb": 64}, "scheduler_hints": {"q": ' + DEEP + b"}}",
     "$"),
    ("/v1/select_destinations", b'{"flavor": {"vcpus": 1, "memory_mb": 64}, "scheduler_hints": {"q": '
     + b"[" * 40 + b"]" * 40 + b"}}", "$.scheduler_hints"),
    ("/v1/select_destinations", b'{"flavor": {"vcpus": 1, "memory_mb": 64}, "image": {"properties": {"p": '
     + b"[" * 40 + b"]" * 40 + b"}}}", "$.image.properties"),
    ("/v1/resource-stats", b'{"name": "h", "stats": {"vcpus": 1, "memory_mb": 1, "local_gb": 1, "cpu_info": '
     + b'{"a": ' * 40 + b"1" + b"}" * 40 + b"}}", "$.stats.cpu_info"),
    ("/v1/select_destinations", b'{"flavor": {"name": "\xff\xfe", "vcpus": 1, "memory_mb": 64}}', "$"),
])
def test_deep_nesting_and_invalid_utf8_are_a_400_naming_the_field(http: httpx.Client, path: str, body: bytes,
                                                                  field: str) -> None:
    """Issue 11: these were RecursionError / UnicodeDecodeError answered by the catch-all (500)."""
    before = _state(http), _unhandled(http)
    response = http.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["field"] == field
    assert (_state(http), _unhandled(http)) == before


@pytest.mark.parametrize("limit", ["²", "٣", "-1", "0", "1e3", "9999999999"])
def test_a_limit_that_is_not_ascii_digits_is_a_400(http: httpx.Client, limit: str) -> None:
    response = http.post("/v1/candidates", params={"limit": limit}, json=SPEC)
    assert response.status_code == 400 and response.json()["field"] == "limit"


LONG = "A" * 256  # one past the 255 characters of a name, id or key (Nova's String(255) columns)


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("POST", "/v1/resource-stats", {"name": HOST, "stats": {**STATS, "metrics": [{"name": LONG, "value": 1}]}},
     "$.stats.metrics[0].name"),
    ("POST", "/v1/resource-stats", {"name": HOST, "stats": {**STATS, "hypervisor_hostname": LONG}},
     "$.stats.hypervisor_hostname"),
    ("POST", "/v1/resource-stats", {"name": HOST, "stats": {**STATS, "host_ip": LONG}}, "$.stats.host_ip"),
    ("POST", "/v1/resource-stats", {"name": HOST, "stats": {**STATS, "supported_instances": [["x86_64", LONG]]}},
     "$.stats.supported_instances[0][1]"),
    ("POST", "/v1/resource-stats", {"name": HOST, "stats": {**STATS, "supported_instances": [["a", "b", "c", "d"]]}},
     "$.stats.supported_instances[0]"),
    ("POST", "/v1/resource-stats/batch", {"reports": [{"name": HOST, "stats": {**STATS, "uuid": LONG}}]},
     "$.reports[0].stats.uuid"),
    ("POST", "/v1/select_destinations", {**SPEC, "flavor": {**SPEC["flavor"], "name": LONG}}, "$.flavor.name"),
    ("POST", "/v1/select_destinations", {**SPEC, "image": {"id": LONG}}, "$.image.id"),
    ("POST", "/v1/select_destinations", {**SPEC, "image": {"properties": {LONG: "x"}}}, "$.image.properties"),
    ("POST", "/v1/select_destinations", {**SPEC, "scheduler_hints": {LONG: "x"}}, "$.scheduler_hints"),
    ("POST", "/v1/select_destinations", {**SPEC, "member_of": [["1"] * 10_001]}, "$.member_of[0]"),
    ("POST", "/v1/select_destinations", {**SPEC, "instance_group": {"policies": ["affinity", "anti-affinity"]}},
     "$.instance_group.policies"),
    ("POST", "/v1/select_destinations", {**SPEC, "requested_destination": {"host": LONG}},
     "$.requested_destination.host"),
    ("POST", "/v1/select_destinations", {**SPEC, "resources": {"CUSTOM_" + LONG: 1}}, "$.resources"),
    ("POST", "/v1/candidates", {**SPEC, "flavor": {**SPEC["flavor"], "id": LONG}}, "$.flavor.id"),
])
def test_an_over_long_value_is_a_400_naming_the_field_and_changes_nothing(
        http: httpx.Client, method: str, path: str, body: dict[str, Any], field: str) -> None:
    """Issue 11 item 3: these were bounded by the body limit alone; a 256-character metric name reached the store."""
    before = _state(http), _unhandled(http)
    response = http.request(method, path, json=body)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["field"] == field
    assert (_state(http), _unhandled(http)) == before


@pytest.mark.parametrize(("method", "path", "params", "field"), [
    ("DELETE", f"/v1/hosts/{LONG}", {}, "host"),
    ("GET", f"/v1/hosts/{HOST}", {"node": LONG}, "node"),
    ("DELETE", f"/v1/allocations/{LONG}", {}, "consumer"),
    ("POST", f"/v1/migrations/{LONG}/revert", {}, "migration"),
    ("DELETE", f"/v1/instances/{HOST}/{LONG}", {}, "instance"),
])
def test_an_over_long_name_in_the_path_or_query_is_a_400(http: httpx.Client, method: str, path: str,
                                                         params: dict[str, str], field: str) -> None:
    before = _state(http)
    response = http.request(method, path, params=params)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert _state(http) == before


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server whose body limit is above the free-form fields' own, so that theirs is the one that refuses."""
    config = {**CONFIG, "gantt": {**CONFIG["gantt"], "max_body_bytes": 1024 * 1024}}
    with ServerProcess("memory://", config=config, workdir=tmp_path_factory.mktemp("roomy")) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        client.post("/v1/resource-stats", json={"name": HOST, "stats": STATS}).raise_for_status()
        yield client


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/select_destinations", {**SPEC, "scheduler_hints": {"different_host": ["x" * 36] * 4000}},
     "$.scheduler_hints"),
    ("/v1/select_destinations", {**SPEC, "image": {"properties": {"p": "x" * 200_000}}}, "$.image.properties"),
    ("/v1/resource-stats", {"name": HOST, "stats": {**STATS, "stats": {"s": "x" * 200_000}}}, "$.stats.stats"),
    ("/v1/resource-stats", {"name": HOST, "stats": {**STATS, "cpu_info": {"features": ["f" * 30] * 6000}}},
     "$.stats.cpu_info"),
])
def test_free_form_json_over_its_size_bound_is_a_400_saying_so(roomy: httpx.Client, path: str,
                                                                 body: dict[str, Any], field: str) -> None:
    before = _state(roomy)
    response = roomy.post(path, json=body)
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["field"] == field and "bytes" in problem["detail"], problem
    assert _state(roomy) == before
