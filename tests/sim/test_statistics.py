"""Issue 34 item 10, the researcher's simulator: intervals that stay inside a figure's range, paired differences
between points run on the same seeds, a Δ column for --compare, categorical sweep points not joined by lines, and
event labels that do not stand on each other."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gantt.sim import parse_scenario
from gantt.sim.report import delta, label_levels, sweep_figure, timeline_figures
from gantt.sim.simulator import Simulation
from gantt.sim.sweep import _estimate, format_estimate, parse_axis, plan_sweep, run_sweep, summarize, sweep_csv
from tests.sim.test_research import SMALL
from tests.sim.test_simulator import scenario_data


def test_a_count_interval_is_cut_at_zero_and_a_share_at_100() -> None:
    count = _estimate([0.0, 0.0, 0.0, 40.0], (0.0, None))
    assert count["mean"] == 10.0 and count["ci95_half_width"] > 10.0  # the t interval would reach below 0
    assert count["ci95_low"] == 0.0 and count["ci95_high"] == pytest.approx(10.0 + count["ci95_half_width"])
    share = _estimate([100.0, 100.0, 100.0, 60.0], (0.0, 100.0))
    assert share["ci95_high"] == 100.0 and share["ci95_low"] == pytest.approx(90.0 - share["ci95_half_width"])
    # shown with its ends where it was cut, as mean ± half-width where it was not
    assert format_estimate(count) == f"10.0 [0.00, {count['ci95_high']:,.1f}]"
    plain = _estimate([10.0, 11.0, 12.0], (0.0, None))
    assert format_estimate(plain) == f"11.0 ± {plain['ci95_half_width']:,.2f}"


def policy_sweep() -> dict:
    plan = plan_sweep(scenario_data(), [parse_axis("seed=1..4"), parse_axis("policy.kind=gantt,nova-classic")],
                      SMALL)
    return summarize(plan, run_sweep(plan, max_requests=150, jobs=1))


def test_a_sweep_never_shows_a_figure_outside_its_range_and_pairs_its_points_seed_by_seed(tmp_path: Path) -> None:
    summary = policy_sweep()
    for point in summary["points"]:
        for key, entry in point["figures"].items():
            if entry["ci95_low"] is None:
                continue
            assert entry["ci95_low"] >= 0.0, key
            if entry["unit"].startswith("%"):
                assert entry["ci95_high"] <= 100.0, key
    [diff] = summary["differences"]
    assert diff["baseline"] == "policy.kind=gantt" and diff["point"] == "policy.kind=nova-classic"
    base, other = (p["figures"] for p in summary["points"])
    for key, entry in diff["figures"].items():
        expected = [b - a for a, b in zip(base[key]["values"], other[key]["values"], strict=True)]
        assert entry["values"] == pytest.approx(expected, abs=1e-4), key
        assert entry["mean"] == pytest.approx(statistics.fmean(expected), abs=1e-4), key
        if len(set(expected)) > 1:  # the t interval of the differences themselves, not cut at 0
            half = 3.1824 * statistics.stdev(expected) / 2.0  # t(0.975, 3), n = 4
            assert entry["ci95_half_width"] == pytest.approx(half, rel=1e-3), key
            assert entry["ci95_low"] == pytest.approx(entry["mean"] - half, rel=1e-3, abs=1e-4), key
    rows = sweep_csv(summary).splitlines()
    assert any(row.startswith("policy.kind=nova-classic − policy.kind=gantt,") for row in rows)


def test_the_sweep_command_prints_the_paired_differences() -> None:
    done = subprocess.run([sys.executable, "-m", "gantt", "simulate", SMALL, "--requests", "100", "--quiet",
                           "--sweep", "seed=1..2", "--sweep", "filters.host_subset_size=1,3"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="250"))
    assert done.returncode == 0, done.stderr
    assert "Paired differences against filters.host_subset_size=1," in done.stdout
    assert "Δ filters.host_subset_size=3" in done.stdout + done.stderr


def test_categorical_points_are_not_joined_by_lines_and_a_numeric_axis_is() -> None:
    categorical = sweep_figure(policy_sweep())
    plan = plan_sweep(scenario_data(), [parse_axis("seed=1..2"), parse_axis("filters.host_subset_size=1,3")], SMALL)
    numeric = sweep_figure(summarize(plan, run_sweep(plan, max_requests=80, jobs=1)))
    line_styles = {fig: {line.get_linestyle() for ax in fig.axes if ax.get_visible() for line in ax.get_lines()
                         if line.get_marker() == "o"} for fig in (categorical, numeric)}
    assert line_styles[categorical] == {"None"}
    assert line_styles[numeric] == {"-"}


def test_compare_has_a_delta_column(tmp_path: Path) -> None:
    assert delta("0.52 / 0.91 ms", "0.60 / 1.10 ms") == "+0.08 / +0.19 ms"
    assert delta("1,200 (1,150 / 50 / 0)", "1,200 (1,180 / 20 / 0)") == "0 (+30 / -30 / 0)"
    assert delta("az1 45.0%, az2 50.0%", "az1 46.5%, az2 50.0%") == "az1 +1.5%, az2 0%"
    assert delta("gantt", "nova-classic") == "" and delta("none", "NoValidHost: 3") == ""
    out = tmp_path / "both.json"
    done = subprocess.run([sys.executable, "-m", "gantt", "simulate", "--compare", SMALL, SMALL, "--requests", "100",
                           "--quiet", "--json", str(out)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="250"))
    assert done.returncode == 0, done.stderr
    assert "Δ (B − A)" in done.stdout + done.stderr
    body = json.loads(out.read_text())
    assert body["delta_b_minus_a"]["instances.placed"] == 0.0  # the same scenario twice


def test_event_labels_close_in_time_stand_at_different_heights() -> None:
    assert label_levels([10.0, 10.5, 50.0], span=100.0) == [1.0, 0.66, 1.0]
    assert label_levels([10.0, 30.0], span=100.0) == [1.0, 1.0]
    data = scenario_data()
    data["failures"] = [{"at": 20.0, "kind": "rack_lost", "rack": "az1-r1"},
                        {"at": 20.5, "kind": "rack_lost", "rack": "az1-r2"}]
    r = Simulation(parse_scenario(data), max_requests=200).run()
    fig = timeline_figures([r])["utilization"]
    heights = sorted({round(t.xy[1], 2) for ax in fig.axes for t in ax.texts if "rack_lost" in t.get_text()})
    assert heights == [0.66, 1.0]
