"""RequestContext.build memoized per request class (gantt.compute.context_memo): the key is everything the build
reads, proved by a recording proxy over varied specs; a change of any key field or option is seen; the rest of
the spec varies per request without a new build, and each request gets its own context."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import msgspec
import pytest

from gantt.compute.context_memo import BUILD_FIELDS, BUILD_OPTIONS, ContextMemo
from gantt.compute.request import RequestContext
from gantt.config import Config
from gantt.model import InvalidRequest, RequestSpec, decode

ALIAS = json.dumps({"name": "vf", "vendor_id": "8086", "product_id": "1520", "device_type": "type-VF"})
FLAVOR = {"name": "m1.small", "vcpus": 2, "memory_mb": 2048, "root_gb": 20}
# Specs that between them take every branch of the build that reads a field
SPECS: list[dict[str, Any]] = [
    {"flavor": FLAVOR},
    {"flavor": {**FLAVOR, "extra_specs": {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require",
                                          "pci_passthrough:alias": "vf:1", "trait:CUSTOM_A": "required",
                                          "resources:CUSTOM_B": "1"}},
     "image": {"properties": {"hw_numa_nodes": 1, "trait:CUSTOM_C": "forbidden", "hw_architecture": "x86_64"}},
     "scheduler_hints": {"_nova_check_type": ["rebuild"]}},
    {"flavor": FLAVOR, "migration_uuid": "m-1", "instance_uuids": ["c-1"],
     "scheduler_hints": {"_nova_check_type": "x"}},
    {"flavor": FLAVOR, "instance_group": {"uuid": "g-1", "policy": "anti-affinity", "hosts": ["h1"],
                                          "members": ["c1"], "rules": {"max_server_per_host": 2}},
     "resources": {"CUSTOM_D": 2}, "required_traits": ["CUSTOM_E"], "forbidden_traits": ["CUSTOM_F"],
     "member_of": [["in:a,b"], ["!c"]]},
    {"flavor": {**FLAVOR, "extra_specs": {"group_policy": "isolate"}},
     "pci_requests": [{"spec": [{"vendor_id": "8086"}], "count": 1}], "pci_in_placement": True,
     "network_metadata": {"physnets": ["p1"], "tunneled": True},
     "request_groups": [{"id": "port-1", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10}},
                        {"id": "port-2", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 20}}],
     "group_policy": "none", "same_subtree": [["port-1", "port-2"]]},
    {"resources": {"VCPU": 1}},
]


class Recorder:
    """``target`` as the build sees it, every attribute read recorded by its path from the root (``pci.alias``);
    a Struct read is wrapped in turn when ``deep``."""

    def __init__(self, target: Any, reads: set[str], prefix: str = "", deep: bool = True) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_reads", reads)
        object.__setattr__(self, "_prefix", prefix)
        object.__setattr__(self, "_deep", deep)

    def __getattr__(self, name: str) -> Any:
        path = self._prefix + name
        self._reads.add(path)
        value = getattr(self._target, name)
        if self._deep and isinstance(value, msgspec.Struct):
            return Recorder(value, self._reads, path + ".")
        return value


def _config() -> Config:
    return Config.from_dict({"pci": {"alias": [ALIAS]}})


def _derived(ctx: RequestContext) -> dict[str, Any]:
    """Every field of a context but its spec and time, as values."""
    return {f.name: getattr(ctx, f.name) for f in fields(ctx) if f.name not in ("spec", "now")}


def _spec(**fields: Any) -> RequestSpec:
    return decode({"flavor": FLAVOR, **fields}, RequestSpec)


@pytest.mark.parametrize("index", range(len(SPECS)))
def test_the_build_reads_only_the_keys_fields_and_options(index: int) -> None:
    spec_reads: set[str] = set()
    config_reads: set[str] = set()
    spec = decode(SPECS[index], RequestSpec)
    RequestContext.build(Recorder(spec, spec_reads, deep=False), Recorder(_config(), config_reads),  # type: ignore[arg-type]  # a recording stand-in
                         0.0)
    assert spec_reads <= set(BUILD_FIELDS), spec_reads - set(BUILD_FIELDS)
    options = {read for read in config_reads if "." in read}  # a section read on its way to an option
    allowed = set(BUILD_OPTIONS) | {"pci.aliases", "pci.check"}  # pci.alias parsed, and checked
    assert options <= allowed, options - allowed
    assert {read for read in config_reads if "." not in read} <= {o.split(".")[0] for o in BUILD_OPTIONS}


def test_the_recorder_sees_a_read_outside_the_key() -> None:
    """The proxy can fail: a read of a field outside the key is recorded."""
    reads: set[str] = set()
    assert Recorder(_spec(project_id="p"), reads, deep=False).project_id == "p"
    assert reads == {"project_id"} and "project_id" not in BUILD_FIELDS


@pytest.mark.parametrize("index", range(len(SPECS)))
def test_each_answer_equals_a_fresh_build(index: int) -> None:
    memo, config = ContextMemo(), _config()
    spec = decode(SPECS[index], RequestSpec)
    fresh = RequestContext.build(spec, config, 1.0)
    for now in (2.0, 3.0):  # a miss, then a hit
        ctx = memo.build(spec, config, now)
        assert _derived(ctx) == _derived(fresh) and ctx.spec is spec and ctx.now == now
    assert memo.hits == 1


CHANGES: dict[str, tuple[Any, Any]] = {
    "flavor": ({"flavor": FLAVOR}, {"flavor": {**FLAVOR, "vcpus": 4}}),
    "image": ({"image": {"properties": {"trait:CUSTOM_A": "required"}}},
              {"image": {"properties": {"trait:CUSTOM_A": "forbidden"}}}),
    "num_instances": ({"scheduler_hints": {"_nova_check_type": "rebuild"}},
                      {"scheduler_hints": {"_nova_check_type": "rebuild"}, "num_instances": 2}),
    "scheduler_hints": ({"scheduler_hints": {"_nova_check_type": "x"}},
                        {"scheduler_hints": {"_nova_check_type": "rebuild"}}),
    "instance_group": ({"instance_group": {"uuid": "g", "policy": "affinity"}},
                       {"instance_group": {"uuid": "g", "policy": "anti-affinity"}}),
    "resources": ({"resources": {"CUSTOM_A": 1}}, {"resources": {"CUSTOM_A": 2}}),
    "required_traits": ({"required_traits": ["CUSTOM_A"]}, {"required_traits": ["CUSTOM_B"]}),
    "forbidden_traits": ({"forbidden_traits": ["CUSTOM_A"]}, {"forbidden_traits": ["CUSTOM_B"]}),
    "member_of": ({"member_of": [["a"]]}, {"member_of": [["b"]]}),
    "migration_uuid": ({"scheduler_hints": {"_nova_check_type": "rebuild"}, "instance_uuids": ["c"]},
                       {"scheduler_hints": {"_nova_check_type": "rebuild"}, "instance_uuids": ["c"],
                        "migration_uuid": "m"}),
    "pci_requests": ({"pci_requests": [{"spec": [{"vendor_id": "8086"}]}]},
                     {"pci_requests": [{"spec": [{"vendor_id": "8086"}], "count": 2}]}),
    "pci_in_placement": ({"flavor": {**FLAVOR, "extra_specs": {"pci_passthrough:alias": "vf:1"}}},
                         {"flavor": {**FLAVOR, "extra_specs": {"pci_passthrough:alias": "vf:1"}},
                          "pci_in_placement": True}),
    "network_metadata": ({"network_metadata": {"physnets": ["p1"]}}, {"network_metadata": {"physnets": ["p2"]}}),
    "request_groups": ({"request_groups": [{"id": "g", "resources": {"CUSTOM_A": 1}}]},
                       {"request_groups": [{"id": "g", "resources": {"CUSTOM_A": 2}}]}),
    "group_policy": ({"request_groups": [{"id": "g", "resources": {"CUSTOM_A": 1}}], "group_policy": "none"},
                     {"request_groups": [{"id": "g", "resources": {"CUSTOM_A": 1}}], "group_policy": "isolate"}),
    "same_subtree": ({"request_groups": [{"id": "g", "resources": {"CUSTOM_A": 1}},
                                         {"id": "h", "resources": {"CUSTOM_B": 1}}]},
                     {"request_groups": [{"id": "g", "resources": {"CUSTOM_A": 1}},
                                         {"id": "h", "resources": {"CUSTOM_B": 1}}], "same_subtree": [["g", "h"]]}),
}


def test_every_key_field_has_a_change() -> None:
    assert set(CHANGES) == set(BUILD_FIELDS)


@pytest.mark.parametrize("name", BUILD_FIELDS)
def test_a_change_of_any_key_field_is_seen(name: str) -> None:
    memo, config = ContextMemo(), _config()
    outcomes: list[Any] = []
    for fields_ in (*CHANGES[name], CHANGES[name][0]):
        spec = decode({"flavor": FLAVOR, **fields_}, RequestSpec)
        try:
            fresh = _derived(RequestContext.build(spec, config, 0.0))
        except InvalidRequest as exc:
            with pytest.raises(InvalidRequest, match=exc.message):
                memo.build(spec, config, 0.0)
            outcomes.append(exc.message)
            continue
        assert _derived(memo.build(spec, config, 0.0)) == fresh
        outcomes.append(fresh)
    assert outcomes[0] != outcomes[1], "the change must change what the build derives"
    first, second = (decode({"flavor": FLAVOR, **f}, RequestSpec) for f in CHANGES[name])
    assert msgspec.structs.replace(first, **{name: getattr(second, name)}) == second  # only that field differs


@pytest.mark.parametrize("option, values", [
    ("workarounds.disable_fallback_pcpu_query", (False, True)),
    ("filter_scheduler.pci_in_placement", (False, True)),
    ("pci.alias", ([ALIAS], [ALIAS.replace("type-VF", "type-PF")]))])
def test_an_option_changed_in_place_is_seen(option: str, values: tuple[Any, Any]) -> None:
    """Nova's seam sets options in the running Config (gantt.config.per_request)."""
    memo, config = ContextMemo(), _config()
    spec = _spec(flavor={**FLAVOR, "extra_specs": {"hw:cpu_policy": "dedicated", "pci_passthrough:alias": "vf:1"}})
    section, name = option.split(".")
    answers = []
    for value in (*values, values[0]):
        setattr(getattr(config, section), name, value)
        ctx = memo.build(spec, config, 0.0)
        assert _derived(ctx) == _derived(RequestContext.build(spec, config, 0.0))
        answers.append(_derived(ctx))
    assert answers[0] != answers[1] and answers[0] == answers[2]


def test_fields_outside_the_key_vary_without_a_build_and_each_request_has_its_own_context() -> None:
    memo, config = ContextMemo(), _config()
    group = {"uuid": "g", "policy": "anti-affinity", "hosts": ["h1"], "members": ["c1"]}
    first = memo.build(_spec(project_id="p1", instance_group=group), config, 1.0)
    first.placed.append(("h", "h"))
    first.group_hosts.append("h2")
    first.resources["VCPU"] = 99
    first.scratch["x"] = 1
    first.instance_index = 3
    spec = _spec(project_id="p2", user_id="u", availability_zone="az", instance_uuids=["c-9"], request_id="r",
                 force_hosts=["h"], ignore_hosts=["i"], alternates=1, instance_group=group,
                 requested_destination={"host": "h"})
    second = memo.build(spec, config, 2.0)
    assert memo.hits == 1
    assert second.spec is spec and second.now == 2.0
    assert second.placed == [] and second.group_hosts == ["h1"] and second.resources["VCPU"] == 2
    assert second.scratch == {} and second.instance_index == 0 and second.group_members == {"c1"}
    assert _derived(second) == _derived(RequestContext.build(spec, config, 2.0))


def test_a_tuple_is_not_taken_for_a_list_nor_true_for_one() -> None:
    """Free-form values that encode alike (a tuple and a list) or compare alike (True and 1) are not conflated:
    Nova's rebuild hint is a one-element list, and a tuple is no rebuild."""
    memo, config = ContextMemo(), _config()
    as_list = msgspec.structs.replace(_spec(), scheduler_hints={"_nova_check_type": ["rebuild"]})
    as_tuple = msgspec.structs.replace(_spec(), scheduler_hints={"_nova_check_type": ("rebuild",)})
    assert memo.build(as_list, config, 0.0).rebuild
    assert not memo.build(as_tuple, config, 0.0).rebuild
    as_true = _spec(scheduler_hints={"k": True})
    as_one = _spec(scheduler_hints={"k": 1})
    assert memo.build(as_true, config, 0.0).hints["k"] is True
    assert memo.build(as_one, config, 0.0).hints["k"] == 1 and memo.hits == 0


def test_a_refusal_is_not_kept() -> None:
    memo, config = ContextMemo(), _config()
    bad = _spec(flavor={**FLAVOR, "extra_specs": {"trait:CUSTOM_A": "maybe"}})
    for _ in range(2):
        with pytest.raises(InvalidRequest, match="required"):
            memo.build(bad, config, 0.0)
    assert memo.hits == 0


def test_the_memo_is_bounded() -> None:
    memo, config = ContextMemo(size=4), _config()
    for vcpus in range(1, 11):
        memo.build(_spec(flavor={**FLAVOR, "vcpus": vcpus}), config, 0.0)
    assert len(memo._built) <= 4


def test_the_same_seeded_requests_pick_the_same_hosts_with_and_without_the_memo() -> None:
    """A run of mixed requests (flavors, traits, a server group, forced hosts, projects) on two schedulers of the
    same seed, one building every context afresh: the same picks and alternates, request by request."""
    import random

    from tests.conftest import make_scheduler, request

    def run(memo: bool) -> list[Any]:
        sched = make_scheduler({f"h{i}": {"vcpus": 16 + i % 5, "memory_mb": 32768, "local_gb": 500,
                                          "traits": ["CUSTOM_A"] if i % 3 == 0 else []} for i in range(24)},
                               filter_scheduler={"shuffle_best_same_weighed_hosts": True, "host_subset_size": 3},
                               gantt={"seed": 11})
        if not memo:
            sched.engine.contexts.build = RequestContext.build  # type: ignore[method-assign]  # every context afresh
        rng = random.Random(5)
        picks: list[Any] = []
        held: list[str] = []
        for i in range(200):
            kind = rng.randrange(5)
            spec = request(vcpus=1 + kind % 3, memory_mb=512 * (1 + kind % 2), project_id=f"p{rng.randrange(3)}")
            if kind == 1:
                spec["required_traits"] = ["CUSTOM_A"]
            elif kind == 2:
                spec["instance_group"] = {"uuid": "g-1", "policy": "anti-affinity", "hosts": [], "members": []}
                spec["instance_uuids"] = [f"vm-{i}"]
            elif kind == 3:
                spec["force_hosts"] = [f"h{rng.randrange(24)}"]
            try:
                [[chosen, *alternates]] = sched.select_destinations(spec)
            except Exception as exc:  # the refusal is part of what must be equal
                picks.append(type(exc).__name__)
                continue
            picks.append((chosen.host, [a.host for a in alternates]))
            held.append(chosen.consumer_uuid or "")
            if len(held) > 40:
                sched.release(held.pop(0))
        picks.append(sched.engine.contexts.hits if memo else None)
        return picks

    memoized, fresh = run(True), run(False)
    assert memoized[:-1] == fresh[:-1]
    assert memoized[-1] > 150  # most contexts came from the memo
    assert len({p[0] for p in memoized if isinstance(p, tuple)}) > 5  # the run spread over many hosts
