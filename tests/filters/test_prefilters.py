"""Nova's request filters (prefilters) and the options that switch them: isolation must isolate (issue 9)."""

from __future__ import annotations

import logging

import pytest

from gantt.config import Config, load_config
from gantt.model import InvalidRequest
from tests.conftest import make_scheduler, passing, request

F = ["ComputeFilter"]


def _cloud(**scheduler: bool):  # type: ignore[no-untyped-def]
    sched = make_scheduler({"shared": {}, "p1-only": {}, "gold": {"traits": ["CUSTOM_GOLD"]},
                            "off": {"traits": ["COMPUTE_STATUS_DISABLED"]}}, filters=F, scheduler=scheduler)
    sched.update_aggregate({"id": 1, "hosts": ["p1-only"], "metadata": {"filter_tenant_id": "p1"}})
    sched.update_aggregate({"id": 2, "hosts": ["gold"], "metadata": {"trait:CUSTOM_GOLD": "required"}})
    return sched


def test_tenant_aggregate_keeps_a_tenant_to_its_aggregate() -> None:
    sched = _cloud(limit_tenants_to_placement_aggregate=True)
    assert passing(sched, request(project_id="p1")) == {"p1-only"}
    assert passing(sched, request(project_id="p2")) == {"shared", "p1-only", "gold"}  # no aggregate for p2
    required = _cloud(limit_tenants_to_placement_aggregate=True, placement_aggregate_required_for_tenants=True)
    assert passing(required, request(project_id="p2")) == set()


def test_a_switch_turned_on_after_a_decision_applies_to_the_next_one() -> None:
    """Nova's request filters read their [scheduler] switches at each request; Gantt's Nova seam sets them in the
    running scheduler's Config when nova.conf's change (gantt.nova.conf.RequestOptions). The mask a
    decision cached while a switch was off (every host) must not answer the next decision once it is on."""
    sched = _cloud()
    assert passing(sched, request(project_id="p1")) == {"shared", "p1-only", "gold"}
    assert passing(sched, request(project_id="p2")) == {"shared", "p1-only", "gold"}
    sched.config.scheduler.limit_tenants_to_placement_aggregate = True
    assert passing(sched, request(project_id="p1")) == {"p1-only"}
    assert passing(sched, request(project_id="p2")) == {"shared", "p1-only", "gold"}
    sched.config.scheduler.placement_aggregate_required_for_tenants = True
    assert passing(sched, request(project_id="p2")) == set()
    sched.config.scheduler.limit_tenants_to_placement_aggregate = False
    assert passing(sched, request(project_id="p2")) == {"shared", "p1-only", "gold"}
    sched.config.scheduler.enable_isolated_aggregate_filtering = True
    assert "gold" not in passing(sched, request(project_id="p2"))


def test_an_isolated_aggregate_takes_only_requests_for_its_trait() -> None:
    sched = _cloud(enable_isolated_aggregate_filtering=True)
    assert "gold" not in passing(sched, request())
    assert passing(sched, request(extra_specs={"trait:CUSTOM_GOLD": "required"})) == {"gold"}


def test_without_the_options_nothing_is_isolated() -> None:
    sched = _cloud()
    assert passing(sched, request(project_id="p2")) == {"shared", "p1-only", "gold"}


def test_image_type_support_requires_the_disk_format_trait() -> None:
    sched = make_scheduler({"a": {"traits": ["COMPUTE_IMAGE_TYPE_QCOW2"]}, "b": {"traits": []}}, filters=F,
                           scheduler={"query_placement_for_image_type_support": True})
    assert passing(sched, request(image={"id": "i", "disk_format": "qcow2"})) == {"a"}
    assert passing(sched, request()) == {"a", "b"}  # no image: nothing required (Nova: boot from volume)


def test_a_disabled_compute_status_trait_is_always_out() -> None:
    assert "off" not in passing(_cloud(), request())


@pytest.mark.parametrize(("section", "option", "value"), [
    ("filter_scheduler", "image_props_weight_multiplier", 1.0),
    ("scheduler", "driver", "fake"),
    ("scheduler", "max_placement_results", 10),
    ("scheduler", "query_placement_for_routed_network_aggregates", True),
    ("oslo_policy", "policy_dirs", ["/etc/nova/policy.d"]),
    ("oslo_policy", "policy_default_rule", "admin"),
])
def test_an_option_without_effect_is_refused_unless_at_novas_default(section: str, option: str,
                                                                      value: object) -> None:
    with pytest.raises(InvalidRequest, match=option):
        Config.from_dict({section: {option: value}})
    Config.from_dict({section: {option: getattr(getattr(Config(), section), option)}})  # the default loads


@pytest.mark.parametrize(("section", "option", "value"), [
    ("filter_scheduler", "cross_cell_move_weight_multiplier", 1.0),
    ("filter_scheduler", "image_props_weight_setting", ["os_distro=1"]),
    ("filter_scheduler", "track_instance_changes", False),
    ("scheduler", "discover_hosts_in_cells_interval", 60),
    ("scheduler", "periodic_task_interval", 30),
    ("pci", "report_in_placement", True),
])
def test_an_option_that_changes_nothing_gantt_decides_is_read_not_used(section: str, option: str,
                                                                       value: object) -> None:
    """Issue 34 item 3: at any value (they were refused unless at Nova's default)."""
    assert Config.from_dict({section: {option: value}}) == Config()


def test_available_filters_limits_what_may_be_enabled() -> None:
    with pytest.raises(InvalidRequest, match="ImagePropertiesFilter"):
        Config.from_dict({"filter_scheduler": {"available_filters": ["nova.x.ComputeFilter"],
                                               "enabled_filters": ["ComputeFilter", "ImagePropertiesFilter"]}})


def test_ignored_nova_conf_sections_are_logged(tmp_path, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "nova.conf"
    path.write_text("[DEFAULT]\nmy_ip = 10.0.0.1\n[database]\nconnection = x\n[oslo_messaging_rabbit]\nx = 1\n"
                    "[scheduler]\nmax_attempts = 2\n")
    with caplog.at_level(logging.INFO, logger="gantt.config"):
        config = load_config(path)
    assert config.scheduler.max_attempts == 2
    assert "sections read, not used by Gantt: database, oslo_messaging_rabbit" in caplog.text
    assert "[DEFAULT] options read, not used by Gantt: my_ip" in caplog.text
