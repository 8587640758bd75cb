"""Issue 17 item 8, the simulator for research: runs that repeat through the real command, sweeps with Student t
intervals, plots with titles, units and the scenario in their names, and a progress bar with an ETA."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pty
import select
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gantt.sim import parse_scenario
from gantt.sim.report import sweep_figure, timeline_figures, write_plots, write_sweep_plots
from gantt.sim.scenario import ScenarioError
from gantt.sim.simulator import Simulation
from gantt.sim.stats import mean_ci, t_cdf, t_quantile
from gantt.sim.sweep import parse_axis, parse_values, plan_sweep, run_sweep, summarize
from tests.sim.test_simulator import EXAMPLES, scenario_data

SMALL = str(EXAMPLES / "small.toml")


def gantt(*args: str, timeout: float = 300, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The real ``gantt`` command (its module entry point, with this interpreter and source tree)."""
    return subprocess.run([sys.executable, "-m", "gantt", *args], capture_output=True, text=True, timeout=timeout,
                          **kwargs)


def split_wall_clock(text: str) -> tuple[str, dict[str, Any]]:
    body = json.loads(text)
    wall = body.pop("wall_clock")
    return json.dumps(body, indent=1), wall


# ------------------------------------------------------------------------------------------ reproducible


def test_two_runs_of_the_command_differ_only_in_the_wall_clock_section(tmp_path: Path) -> None:
    """Separate processes (so a different hash seed each): the JSON is identical byte for byte once the
    wall_clock section, the last one, is set apart."""
    texts = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        done = gantt("simulate", SMALL, "--requests", "600", "--quiet", "--json", str(out))
        assert done.returncode == 0, done.stderr
        texts.append(out.read_text())
    (a, wall_a), (b, wall_b) = (split_wall_clock(t) for t in texts)
    assert a == b
    assert texts[0].split('"wall_clock"')[0] == texts[1].split('"wall_clock"')[0]  # the raw bytes before it too
    assert set(wall_a) == set(wall_b) >= {"wall_seconds", "cpu_seconds", "engine"}
    body = json.loads(texts[0])
    assert body["reproducible"] is True and body["decision_time"] == 0.001 and body["seed"] == 42
    assert not {"wall_seconds", "cpu_seconds", "engine"} & set(body)  # no real-time figure outside wall_clock


# ------------------------------------------------------------------------------------------ statistics


@pytest.mark.parametrize(("df", "expected"), [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (19, 2.093),
                                              (29, 2.045), (10_000, 1.960)])
def test_t_quantile_matches_the_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)
    assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-9)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=6e-4)


def test_mean_ci_is_student_t_over_the_sample_deviation() -> None:
    mean, half = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert mean == 3.0
    assert half == pytest.approx(2.7764 * statistics.stdev([1, 2, 3, 4, 5]) / math.sqrt(5), rel=1e-4)
    assert mean_ci([7.0]) == (7.0, None)  # one seed: no interval
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 0.0)


# ------------------------------------------------------------------------------------------ sweep syntax


def test_sweep_values_and_keys() -> None:
    assert parse_values("1..4,8") == (1, 2, 3, 4, 8)
    assert parse_values("0.5,true,gantt,\"a b\"") == (0.5, True, "gantt", "a b")
    assert parse_axis("filters.host_subset_size=1,3").path == ("policy", "config", "filter_scheduler",
                                                               "host_subset_size")
    assert parse_axis("workload.flavors[1].weight=2").path == ("workload", "flavors", 1, "weight")
    assert parse_axis("seed=1..3").values == (1, 2, 3)


@pytest.mark.parametrize(("axes", "message"), [
    (["seed"], "KEY=VALUES"),
    (["seed=3..1"], "backwards"),
    (["seed=a,b"], "integers"),
    (["seed=1,1"], "repeats"),
    (["hosts=85"], "not a multiple of 2 zone(s) × 10 hosts per rack"),
    (["workload.flavors[9].weight=1"], "no element [9]"),
    (["workload..rate=1"], "not a path"),
    (["workload.rate=[1]"], "only scalars"),
    (["workload.rate=1", "workload.rate=2"], "given twice"),
    (["hosts=80", "cloud.racks_per_az=4"], "sweep one or the other"),
    (["workload.rat=1,2"], "workload"),  # the scenario's own validation names the field
    (["cloud.hosts_per_rack=0"], "hosts_per_rack"),
    (["hosts=80,40"], "at hosts=40 seed=42: failures[0].rack: unknown rack 'az1-r2'"),  # the point is named
])
def test_a_bad_sweep_is_refused_before_anything_runs(axes: list[str], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        plan_sweep(scenario_data(), [parse_axis(a) for a in axes], SMALL)
    assert message in err.value.message


def test_the_command_refuses_options_without_effect(tmp_path: Path) -> None:
    for args, message in ((["--csv", "x.csv"], "--csv writes a sweep"), (["--jobs", "2"], "--jobs runs a sweep"),
                          (["--sweep", "seed=1,2", "--seed", "3"], "--seed or with --sweep"),
                          (["--sweep", "hosts=81"], "not a multiple")):
        done = gantt("simulate", SMALL, "--quiet", *args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_grid_sets_what_it_names() -> None:
    plan = plan_sweep(scenario_data(), [parse_axis("hosts=80,160"), parse_axis("filters.host_subset_size=1,3"),
                                        parse_axis("seed=1..2")], SMALL)
    assert [p.label for p in plan.points] == ["hosts=80 filters.host_subset_size=1",
                                              "hosts=80 filters.host_subset_size=3",
                                              "hosts=160 filters.host_subset_size=1",
                                              "hosts=160 filters.host_subset_size=3"]
    assert plan.seeds == [1, 2] and plan.runs == 8
    first, last = plan.points[0].scenarios[1], plan.points[-1].scenarios[0]
    assert first.cloud.hosts == 80 and first.seed == 2
    assert last.cloud.hosts == 160 and last.seed == 1
    assert first.config().filter_scheduler.host_subset_size == 1
    assert last.config().filter_scheduler.host_subset_size == 3


# ------------------------------------------------------------------------------------------ sweep results


def sweep(seeds: str, *more: str, requests: int = 150) -> dict[str, Any]:
    plan = plan_sweep(scenario_data(), [parse_axis(f"seed={seeds}"), *map(parse_axis, more)], SMALL)
    return summarize(plan, run_sweep(plan, max_requests=requests, jobs=1))


def test_intervals_shrink_with_more_seeds_and_are_the_t_interval_of_the_values() -> None:
    few, many = sweep("1..3"), sweep("1..12")
    assert few["sweep"]["seeds"] == [1, 2, 3] and len(many["sweep"]["seeds"]) == 12
    small, large = few["points"][0]["figures"], many["points"][0]["figures"]
    for key in ("instances.placed", "utilization.VCPU", "utilization.MEMORY_MB", "utilization.DISK_GB",
                "fragmentation"):
        assert large[key]["ci95_half_width"] < small[key]["ci95_half_width"], key
        values = large[key]["values"]
        assert len(values) == 12 and large[key]["n"] == 12
        assert large[key]["mean"] == pytest.approx(statistics.fmean(values), rel=1e-5)
        expected = 2.2010 * statistics.stdev(values) / math.sqrt(12)  # t(0.975, 11)
        assert large[key]["ci95_half_width"] == pytest.approx(expected, rel=1e-3)
        assert large[key]["ci95_low"] == pytest.approx(large[key]["mean"] - large[key]["ci95_half_width"], rel=1e-5)
    assert many["sweep"]["t"] == pytest.approx(2.201, abs=1e-3)
    assert "Student t" in many["sweep"]["statistic"]


def test_the_same_sweep_twice_gives_the_same_output_whatever_the_jobs(tmp_path: Path) -> None:
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        done = gantt("simulate", SMALL, "--requests", "120", "--quiet", "--sweep", "seed=1..3", "--sweep",
                     "hosts=80,160", "--jobs", jobs, "--json", str(out / "s.json"), "--csv", str(out / "s.csv"))
        assert done.returncode == 0, done.stderr
        outputs.append((done.stdout, *split_wall_clock((out / "s.json").read_text()), (out / "s.csv").read_text()))
    (table_1, json_1, _, csv_1), (table_2, json_2, _, csv_2) = outputs
    assert json_1 == json_2 and csv_1 == csv_2 and table_1 == table_2
    body = json.loads(json_1)
    assert [p["label"] for p in body["points"]] == ["hosts=80", "hosts=160"]
    assert [p["hosts"] for p in body["points"]] == [80, 160]
    assert all(p["invariants_hold"] for p in body["points"])
    assert body["sweep"]["axes"] == {"hosts": [80, 160]} and body["sweep"]["runs"] == 6
    # the table: one column per point, mean ± half-width per figure, and the statistic said in its title
    assert "Student t over 3 seeds" in table_1 and "hosts=160" in table_1 and "±" in table_1
    assert "disk utilization at the end" in table_1
    rows = list(csv.DictReader(io.StringIO(csv_1)))
    placed = [r for r in rows if r["figure"] == "instances.placed"]
    assert [r["point"] for r in placed] == ["hosts=80", "hosts=160", "hosts=160 − hosts=80"]  # then the difference
    assert [r["hosts"] for r in placed] == ["80", "160", "160"]
    assert float(placed[0]["mean"]) == body["points"][0]["figures"]["instances.placed"]["mean"]
    assert float(placed[0]["ci95_high"]) == body["points"][0]["figures"]["instances.placed"]["ci95_high"]


def test_failure_reasons_of_a_sweep_are_instances() -> None:
    summary = sweep("1..2", requests=1500)  # enough to fill the small cloud and fail some
    figures = summary["points"][0]["figures"]
    reasons = [k for k in figures if k.startswith("failed_instances.")]
    assert "failed_instances.NoValidHost" in reasons
    assert all(figures[k]["unit"] == "instances" for k in reasons)
    for i in range(2):
        assert sum(figures[k]["values"][i] for k in reasons) == figures["instances.failed"]["values"][i]


# ------------------------------------------------------------------------------------------------ plots


def texts_inside(fig: Any) -> None:
    """Every axes with its title, labels, tick labels and legend, and the figure's title, lie inside the canvas:
    nothing is cut (laid-out positions, not pixels)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    title = fig._suptitle.get_window_extent(renderer)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        extent = ax.get_tightbbox(renderer)  # what is drawn: ticks beyond the limits are not
        where = ax.get_title() or ax.get_ylabel()
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, where
        assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, where
        if ax.get_title():  # the figure's title does not sit on an axes' own title
            assert not title.overlaps(ax.title.get_window_extent(renderer)), where
    assert box.x0 <= title.x0 and title.x1 <= box.x1 and title.y1 <= box.y1


def test_timeline_plots_have_titles_units_and_the_scenario_in_their_names(tmp_path: Path) -> None:
    r = Simulation(parse_scenario(scenario_data()), max_requests=400).run()
    figures = timeline_figures([r])
    assert list(figures) == ["utilization", "retries", "capacity"]
    for fig in figures.values():
        assert "small (gantt)" in fig._suptitle.get_text()
        assert all(ax.get_title() for ax in fig.axes)
        assert fig.axes[-1].get_xlabel() == "virtual time (s)"
        texts_inside(fig)
    every = f"{r['timeline']['t'][1] - r['timeline']['t'][0]:g} s"
    assert [ax.get_ylabel() for ax in figures["retries"].axes] == [
        f"count per {every}", f"instances per {every}", f"instances per {every} / requests"]
    assert [ax.get_ylabel() for ax in figures["capacity"].axes] == ["hosts", "% of free capacity"]
    titles = [ax.get_title() for ax in figures["utilization"].axes]
    assert titles == ["vCPU (VCPU) — small (gantt)", "RAM (MEMORY_MB) — small (gantt)",
                      "disk (DISK_GB) — small (gantt)"]
    assert [ax.get_ylabel() for ax in figures["utilization"].axes] == [
        "vCPU used (% of up hosts)", "RAM used (% of up hosts)", "disk used (% of up hosts)"]
    paths = write_plots([r], tmp_path)
    assert [Path(p).name for p in paths] == ["small-utilization.png", "small-retries.png", "small-capacity.png"]
    assert all(Path(p).stat().st_size > 10_000 for p in paths)


def test_sweep_plots_are_named_after_the_scenario_and_the_point(tmp_path: Path) -> None:
    plan = plan_sweep(scenario_data(), [parse_axis("seed=1..2"), parse_axis("filters.host_subset_size=1,3")], SMALL)
    results = run_sweep(plan, max_requests=100, jobs=1)
    summary = summarize(plan, results)
    fig = sweep_figure(summary)
    assert "small (gantt)" in fig._suptitle.get_text() and "95 % CI (Student t) over 2 seeds" in \
        fig._suptitle.get_text()
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(summary["points"][0]["figures"])
    for ax, entry in zip(visible, summary["points"][0]["figures"].values(), strict=True):
        assert ax.get_title() == entry["label"] and ax.get_ylabel() == entry["unit"]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["filters.host_subset_size=1",
                                                                "filters.host_subset_size=3"]
    texts_inside(fig)
    names = sorted(Path(p).name for p in write_sweep_plots(summary, [runs[0] for runs in results], tmp_path))
    assert names == sorted(["small-sweep-filters.host_subset_size.png",
                            *(f"small-filters.host_subset_size={v}_seed=1-{kind}.png" for v in (1, 3)
                              for kind in ("utilization", "retries", "capacity"))])
    assert all((tmp_path / n).stat().st_size > 10_000 for n in names)


# --------------------------------------------------------------------------------------------- progress


def run_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run the command with stderr on a pseudo-terminal (stdout to a pipe); return its status and the terminal's
    output."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="160", TERM="xterm-256color")
    proc = subprocess.Popen([sys.executable, "-m", "gantt", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode(errors="replace")


def test_the_progress_bar_shows_an_eta_on_a_terminal_only() -> None:
    status, screen = run_on_a_terminal("simulate", SMALL, "--requests", "1500")
    assert status == 0
    assert "ETA" in screen and "0:00:00" in screen and "1500/1500" in screen
    status, screen = run_on_a_terminal("simulate", SMALL, "--requests", "100", "--quiet")
    assert status == 0 and "ETA" not in screen
    # a sweep: one bar over its runs
    status, screen = run_on_a_terminal("simulate", SMALL, "--requests", "50", "--sweep", "seed=1..3")
    assert status == 0 and "ETA" in screen and "3/3" in screen
    # not a terminal: no bar at all
    done = gantt("simulate", SMALL, "--requests", "100")
    assert done.returncode == 0 and "ETA" not in done.stderr and "━" not in done.stderr


def test_without_a_seed_axis_each_point_runs_once_and_has_no_interval() -> None:
    from gantt.sim.cli import sweep_table

    plan = plan_sweep(scenario_data(), [parse_axis("policy.kind=gantt,nova-classic")], SMALL, seed=9)
    summary = summarize(plan, run_sweep(plan, max_requests=100, jobs=1))
    assert summary["sweep"]["seeds"] == [9] and summary["sweep"]["t"] is None
    assert summary["policy"] == ["gantt", "nova-classic"]  # varied: not claimed to be one of them
    placed = summary["points"][1]["figures"]["instances.placed"]
    assert placed["n"] == 1 and placed["ci95_half_width"] is None and placed["ci95_low"] is None
    title = str(sweep_table(summary).title)
    assert title.startswith("Sweep of small:") and "seed 9" in title and "no interval" in title
