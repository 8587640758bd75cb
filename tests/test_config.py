from __future__ import annotations

from pathlib import Path

import pytest

from gantt import InvalidRequest, Scheduler
from gantt.config import NOVA_DEFAULT_FILTERS, Config, load_config


def test_defaults_are_novas() -> None:
    config = Config()
    assert config.filter_scheduler.enabled_filters == NOVA_DEFAULT_FILTERS
    assert config.filter_scheduler.host_subset_size == 1
    assert config.filter_scheduler.io_ops_weight_multiplier == -1.0
    assert config.scheduler.max_attempts == 3
    assert config.default.service_down_time == 60.0


def test_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "gantt.toml"
    path.write_text('[filter_scheduler]\nhost_subset_size = 4\nenabled_filters = ["ComputeFilter"]\n'
                    '[DEFAULT]\ndefault_availability_zone = "zone-a"\n[gantt]\nclaim_timeout = 30\n')
    config = load_config(path)
    assert config.filter_scheduler.host_subset_size == 4
    assert config.default.default_availability_zone == "zone-a"
    assert config.gantt.claim_timeout == 30


def test_nova_conf_ini_is_read(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text(
        "[DEFAULT]\nservice_down_time = 120\ntransport_url = rabbit://x\n"
        "[filter_scheduler]\nenabled_filters = ComputeFilter, AvailabilityZoneFilter\n"
        "shuffle_best_same_weighed_hosts = true\nram_weight_multiplier = -1.5\n"
        "[scheduler]\nmax_attempts = 5\n[database]\nconnection = mysql://nova\n"
    )
    config = load_config(path)
    assert config.filter_scheduler.enabled_filters == ["ComputeFilter", "AvailabilityZoneFilter"]
    assert config.filter_scheduler.shuffle_best_same_weighed_hosts is True
    assert config.filter_scheduler.ram_weight_multiplier == -1.5
    assert config.scheduler.max_attempts == 5
    assert config.default.service_down_time == 120


def test_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "g.toml"
    path.write_text("[scheduler]\nmax_attempts = 7\n")
    monkeypatch.setenv("GANTT_CONFIG", str(path))
    assert load_config().scheduler.max_attempts == 7


def test_unknown_option_is_an_error_naming_it() -> None:
    with pytest.raises(InvalidRequest) as err:
        Config.from_dict({"filter_scheduler": {"host_subset_sise": 2}})
    assert "host_subset_sise" in str(err.value)


def test_bad_value_type_names_the_field() -> None:
    with pytest.raises(InvalidRequest) as err:
        Config.from_dict({"scheduler": {"max_attempts": "many"}})
    assert err.value.field == "$.scheduler.max_attempts"


def test_unknown_filter_or_weigher_fails_at_start() -> None:
    with pytest.raises(ValueError, match="unknown filter 'NoSuchFilter'"):
        Scheduler({"filter_scheduler": {"enabled_filters": ["NoSuchFilter"]}})
    with pytest.raises(ValueError, match="unknown weigher"):
        Scheduler({"filter_scheduler": {"enabled_filters": ["ComputeFilter"],
                                        "weight_classes": ["NoSuchWeigher"]}})


def test_dotted_nova_class_paths_are_accepted() -> None:
    sched = Scheduler({"filter_scheduler": {
        "enabled_filters": ["nova.scheduler.filters.compute_filter.ComputeFilter"],
        "weight_classes": ["nova.scheduler.weights.ram.RAMWeigher"]}})
    assert [f.name for f in sched.engine.ranker.filters if not f.always_on] == ["ComputeFilter"]
    assert [w.name for w in sched.engine.ranker.weighers] == ["RAMWeigher"]


def test_overrides_make_a_changed_copy() -> None:
    base = Config()
    changed = base.with_overrides(filter_scheduler={"host_subset_size": 3}, default={"service_down_time": 5})
    assert changed.filter_scheduler.host_subset_size == 3
    assert changed.default.service_down_time == 5
    assert base.filter_scheduler.host_subset_size == 1


def test_default_allocation_ratios_apply_to_hosts_that_report_none() -> None:
    sched = Scheduler({"filter_scheduler": {"enabled_filters": ["ComputeFilter"]},
                       "DEFAULT": {"initial_cpu_allocation_ratio": 2.0, "ram_allocation_ratio": 1.5}})
    sched.update_resource_stats("h0", {"vcpus": 8, "memory_mb": 1000, "local_gb": 10})
    inventories = sched.host("h0")["inventories"]
    assert inventories["VCPU"]["capacity"] == 16  # initial_cpu_allocation_ratio
    assert inventories["MEMORY_MB"]["capacity"] == 1500  # ram_allocation_ratio wins over initial_*
    assert inventories["DISK_GB"]["capacity"] == 10  # Nova's initial_disk_allocation_ratio, 1.0
    sched.update_resource_stats("h1", {"vcpus": 8, "memory_mb": 1000, "local_gb": 10, "cpu_allocation_ratio": 3.0})
    assert sched.host("h1")["inventories"]["VCPU"]["capacity"] == 24  # what a host reports wins
