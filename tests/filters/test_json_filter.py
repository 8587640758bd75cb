from __future__ import annotations

import json

import pytest

from gantt import InvalidRequest, NoValidHost
from tests.conftest import make_scheduler, passing, request

F = ["JsonFilter"]


def sched():  # type: ignore[no-untyped-def]
    return make_scheduler({
        "small": {"memory_mb": 2048, "vcpus": 2, "hypervisor_hostname": "small.example",
                  "stats": {"rack": "r1"}, "cpu_info": {"vendor": "Intel"}},
        "big": {"memory_mb": 65536, "vcpus": 32, "hypervisor_hostname": "big.example",
                "stats": {"rack": "r2"}, "cpu_info": {"vendor": "AMD"}},
        "bare": {"memory_mb": 8192, "vcpus": 8, "hypervisor_type": "hyperv"},
    }, filters=F)


def q(query: object, raw: bool = False) -> dict:  # type: ignore[type-arg]
    return request(scheduler_hints={"query": query if raw else json.dumps(query)})


def test_documented_example_and_comparisons() -> None:
    s = sched()
    assert passing(s, q([">=", "$free_ram_mb", 8192])) == {"big", "bare"}
    assert passing(s, q(["and", [">=", "$free_ram_mb", 1024], ["<", "$vcpus_total", 16]])) == {"small", "bare"}
    assert passing(s, q(["or", ["=", "$vcpus_total", 2], [">", "$vcpus_total", 16]])) == {"small", "big"}
    assert passing(s, q(["<=", "$vcpus_total", 8])) == {"small", "bare"}
    # the first argument is compared with every other one
    assert passing(s, q([">", "$vcpus_total", 4, 16])) == {"big"}


def test_in_and_string_attributes() -> None:
    s = sched()
    assert passing(s, q(["in", "$hypervisor_hostname", "small.example", "big.example"])) == {"small", "big"}
    assert passing(s, q(["=", "$stats.rack", "r2"])) == {"big"}
    assert passing(s, q(["=", "$cpu_info.vendor", "Intel"])) == {"small"}
    assert passing(s, q(["=", "$hypervisor_type", "hyperv"])) == {"bare"}
    assert passing(s, q(["in", "r1", "$stats.rack"])) == {"small"}


def test_not_returns_a_list_that_passes_if_any_is_true() -> None:
    s = sched()
    assert passing(s, q(["not", ["=", "$vcpus_total", 2]])) == {"big", "bare"}
    assert passing(s, q(["not", ["=", "$vcpus_total", 2], ["=", "$vcpus_total", 32]])) == {"small", "big", "bare"}


def test_missing_attributes_are_dropped_per_host() -> None:
    s = sched()
    # 'bare' has no stats.rack: the argument vanishes, leaving one argument, which is false
    assert passing(s, q(["=", "$stats.rack", "r1"])) == {"small"}
    assert passing(s, q(["=", "$nonexistent", 1])) == set()
    # where the variable is dropped, 4 is compared with 2 only; elsewhere 4 > "r1" cannot be ordered: false
    assert passing(s, q([">", 4, "$stats.rack", 2])) == {"bare"}
    # an empty query passes everything; an empty sub-query is true
    assert passing(s, q([])) == {"small", "big", "bare"}
    assert passing(s, q(["and", [], ["=", "$vcpus_total", 8]])) == {"bare"}


def test_mixed_types_never_match_and_never_crash() -> None:
    s = sched()
    assert passing(s, q(["<", "$free_ram_mb", "lots"])) == set()
    assert passing(s, q(["=", "$stats.rack", 1])) == set()
    assert passing(s, q([">", "$hypervisor_hostname", "$vcpus_total"])) == set()


def test_query_as_list_hint_and_single_element_list() -> None:
    s = sched()
    assert passing(s, q([">=", "$vcpus_total", 32], raw=True)) == {"big"}
    assert passing(s, request(scheduler_hints={"query": [json.dumps([">=", "$vcpus_total", 32])]})) == {"big"}


def test_usage_moves_the_result() -> None:
    s = sched()
    s.select_destinations(request(memory_mb=60000, scheduler_hints={"query": json.dumps(["=", "$vcpus_total", 32])}))
    assert passing(s, q([">=", "$free_ram_mb", 8192])) == {"bare"}


@pytest.mark.parametrize("query", ["[>=", json.dumps(["~", 1, 2]), json.dumps({"op": "="}), json.dumps([[">", 1]]),
                                   json.dumps([1, 2]), json.dumps(["and", ["nand", 1]])])
def test_malformed_query_names_the_field(query: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        sched().select_destinations(q(query, raw=True))
    assert err.value.field == "$.scheduler_hints.query"


def test_deep_query_is_refused() -> None:
    deep: list = ["=", 1, 1]  # type: ignore[type-arg]
    for _ in range(40):
        deep = ["and", deep]
    with pytest.raises(InvalidRequest):
        sched().select_destinations(q(deep))


def test_explanation() -> None:
    with pytest.raises(NoValidHost) as err:
        sched().select_destinations(q([">", "$vcpus_total", 100]))
    assert "JsonFilter removed 3" in str(err.value)
