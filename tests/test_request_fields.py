"""Issue 9: request fields with Placement's meaning — member_of ('!', 'in:'), trait names."""

from __future__ import annotations

import pytest

from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, passing, request


def _cloud():  # type: ignore[no-untyped-def]
    sched = make_scheduler(4, filters=["ComputeFilter"])
    sched.update_aggregate({"id": 1, "uuid": "agg-one", "hosts": ["h0", "h1"]})
    sched.update_aggregate({"id": 2, "hosts": ["h1", "h2"]})
    return sched


def test_a_forbidden_aggregate_excludes_its_hosts_only() -> None:
    sched = _cloud()
    assert passing(sched, request(member_of=[["!1"]])) == {"h2", "h3"}
    assert passing(sched, request(member_of=[["!agg-one"]])) == {"h2", "h3"}  # by uuid too
    assert passing(sched, request(member_of=[["!in:1,2"]])) == {"h3"}


def test_in_lists_and_groups() -> None:
    sched = _cloud()
    assert passing(sched, request(member_of=[["in:1,2"]])) == {"h0", "h1", "h2"}
    assert passing(sched, request(member_of=[["in:1,2"], ["2"]])) == {"h1", "h2"}  # groups are ANDed
    assert passing(sched, request(member_of=[["1", "2"]])) == {"h0", "h1", "h2"}
    assert passing(sched, request(member_of=[["in:1"], ["!2"]])) == {"h0"}


@pytest.mark.parametrize("member_of", [[["!1", "2"]], [["in:"]], [["in:1,!2"]], [[]]])
def test_malformed_member_of_is_a_400_naming_the_group(member_of: list[list[str]]) -> None:
    sched = _cloud()
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations(request(member_of=member_of))
    assert err.value.field == "$.member_of[0]"


@pytest.mark.parametrize(("fields", "where"), [
    ({"required_traits": ["hw_cpu_x86_avx2"]}, "$.required_traits"),
    ({"forbidden_traits": ["CUSTOM_lower"]}, "$.forbidden_traits"),
    ({"required_traits": ["NOT_A_REAL_TRAIT"]}, "$.required_traits"),
    ({"extra_specs": {"trait:custom_x": "required"}}, "$.required_traits"),
])
def test_an_invalid_trait_name_is_a_400_not_a_no_valid_host(fields: dict[str, object], where: str) -> None:
    sched = _cloud()
    with pytest.raises(InvalidRequest) as err:
        sched.select_destinations(request(**fields))
    assert err.value.field == where and err.value.status == 400


def test_valid_standard_and_custom_traits_pass_validation() -> None:
    sched = make_scheduler({"h0": {"traits": ["HW_CPU_X86_AVX2", "CUSTOM_GPU_A100"]}, "h1": {}}, filters=[])
    assert passing(sched, request(required_traits=["HW_CPU_X86_AVX2", "CUSTOM_GPU_A100"])) == {"h0"}
