"""``[namespace.<name>]``: each namespace its own Config (compute) or VolumeOptions (volume); mistakes refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from gantt.config import load_config
from gantt.model import InvalidRequest

TOML = """
[filter_scheduler]
enabled_filters = ["ComputeFilter"]
[gantt]
max_body_bytes = 12345
[namespace.blue]
kind = "compute"
[namespace.blue.filter_scheduler]
enabled_filters = ["ComputeFilter", "NumInstancesFilter"]
max_instances_per_host = 3
[namespace.vol]
kind = "volume"
scheduler_default_filters = ["CapacityFilter"]
"""

INI = """
[filter_scheduler]
enabled_filters = ComputeFilter
[namespace:blue]
kind = compute
[namespace:blue:filter_scheduler]
enabled_filters = ComputeFilter, NumInstancesFilter
max_instances_per_host = 3
[namespace:vol]
kind = volume
scheduler_default_filters = CapacityFilter
"""


@pytest.mark.parametrize(("name", "text"), [("gantt.toml", TOML), ("nova.conf", INI)])
def test_each_namespace_gets_its_own_options(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    namespaces = load_config(tmp_path / name).namespaces()
    assert list(namespaces) == ["compute", "blue", "vol"]
    compute, blue, vol = namespaces["compute"].config, namespaces["blue"].config, namespaces["vol"].options
    assert compute is not None and blue is not None
    assert compute.filter_scheduler.enabled_filters == ["ComputeFilter"]
    assert compute.filter_scheduler.max_instances_per_host == 50
    assert blue.filter_scheduler.enabled_filters == ["ComputeFilter", "NumInstancesFilter"]
    assert blue.filter_scheduler.max_instances_per_host == 3
    assert blue.gantt == compute.gantt  # the service's own section is the file's, shared
    assert namespaces["vol"].kind == "volume" and vol.scheduler_default_filters == ["CapacityFilter"]


@pytest.mark.parametrize(("text", "field", "words"), [
    ('[namespace.x]\nkind = "disk"\n', "namespace.x.kind", "kind must be one of compute, volume"),
    ('[namespace.x]\n', "namespace.x.kind", "kind must be one of"),
    ('[namespace.x]\nkind = "compute"\nenabled_filters = ["ComputeFilter"]\n', "namespace.x.enabled_filters",
     "not a section a compute namespace has"),
    ('[namespace.x]\nkind = "compute"\n[namespace.x.gantt]\nport = 1\n', "namespace.x.gantt", "whole service's"),
    ('[namespace.x]\nkind = "compute"\n[namespace.x.filter_scheduler]\nhost_subset_sizee = 1\n',
     "namespace.x.filter_scheduler", "host_subset_sizee"),
    ('[namespace.X]\nkind = "compute"\n', "namespace.X", "must match"),
    ('[namespace.compute]\nkind = "compute"\n', "namespace.compute", "top-level sections"),
    ('[namespace.v]\nkind = "volume"\nscheduler_driver = "x"\n', "namespace.v", "scheduler_driver"),
    ('[namespace.v]\nkind = "volume"\nscheduler_default_filters = ["NopeFilter"]\n', "namespace.v", "NopeFilter"),
])
def test_a_wrong_namespace_section_is_refused_by_name(tmp_path: Path, text: str, field: str, words: str) -> None:
    (tmp_path / "gantt.toml").write_text(text)
    with pytest.raises(InvalidRequest, match=words) as caught:
        load_config(tmp_path / "gantt.toml")
    assert caught.value.field == field
