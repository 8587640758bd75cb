"""The simulator on the small example: invariants of the truth, conservation, lost racks, compare mode, errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gantt.sim import ScenarioError, Simulation, parse_scenario
from gantt.sim.cli import main
from gantt.sim.clock import EPOCH
from gantt.sim.metrics import Overcommit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def scenario_data(name: str = "small.toml", **changes: Any) -> dict[str, Any]:
    data = tomllib.loads((EXAMPLES / name).read_text())
    for dotted, value in changes.items():
        node = data
        *path, last = dotted.split(".")
        for part in path:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return data


def run(data: dict[str, Any], requests: int | None = None) -> tuple[Simulation, dict[str, Any]]:
    sim = Simulation(parse_scenario(data), max_requests=requests)
    return sim, sim.run()


def assert_truth_sound(sim: Simulation) -> None:
    truth = sim.truth
    for rc in truth.rc_index:
        cap = truth.rc_col("capacity", rc)
        assert cap is not None
        over = np.flatnonzero(truth.used(rc) > cap + 1e-6)
        assert not len(over), f"{rc} overcommitted on {[truth.host_names[i] for i in over[:5]]}"


def assert_disk_matches_the_truth(sim: Simulation, r: dict[str, Any]) -> None:
    """The disk figure is the truth's DISK_GB used over capacity, on the hosts really up at the end."""
    up = ~sim.failures.dead
    cap = sim.truth.rc_col("capacity", "DISK_GB")
    assert cap is not None
    used = sim.truth.used("DISK_GB")
    assert r["final"]["utilization_all"]["DISK_GB"] == pytest.approx(float(used[up].sum() / cap[up].sum()))


def test_cloud_1m_scenario_is_a_million_hosts_and_its_shape_runs_small() -> None:
    # The full run takes about an hour (README); CI runs its shape on 4,004 one-host racks (racks_per_az above
    # 1,000 keeps the four-digit rack names its aggregates and failures name), through the failures it schedules.
    full = parse_scenario(scenario_data("cloud-1m.toml"))
    assert full.cloud.hosts == 1_000_000 and full.control_plane.schedulers == 1
    # 20 requests/s without bursts reach the failures (at 100 and 130 s) with a cloud that small
    sim, r = run(scenario_data("cloud-1m.toml", **{"cloud.racks_per_az": 1001, "cloud.hosts_per_rack": 1,
                                                   "workload.rate": 20.0, "workload.bursts": []}), requests=4000)
    assert_truth_sound(sim)
    assert r["invariants"]["overcommitted_nodes"] == 0
    assert r["requests"]["placed"] > 0.9 * r["requests"]["total"]
    assert [f["kind"] for f in r["failures"]] == ["rack_lost", "host_flap"]


@pytest.mark.parametrize("policy", ["gantt", "nova-classic"])
def test_small_scenario_keeps_the_invariants(policy: str) -> None:
    sim, r = run(scenario_data(**{"policy.kind": policy}))
    assert_truth_sound(sim)
    inv = r["invariants"]
    assert inv["overcommitted_nodes"] == 0
    assert inv["conservation"]
    req, inst = r["requests"], r["instances"]
    assert req["total"] == 3000 == req["placed"] + req["failed"] + req["partial"]
    assert inst["requested"] == inst["placed"] + inst["failed"]
    assert inst["placed"] > 0.5 * inst["requested"]
    assert r["decisions"] == req["total"]
    # every kind of failure happened, and the scheduler came back
    assert [f["kind"] for f in r["failures"]] == ["rack_lost", "host_flap", "scheduler_crash"]
    assert r["timeline"]["schedulers_up"][-1] == 3
    assert min(r["timeline"]["schedulers_up"]) == 2
    if policy == "gantt":  # issue 10: a server group's policy holds through retries to alternates too
        assert inv["server_group_violations"] == 0
    # Issue 17: failure reasons are counted in one unit, instances, and add up to the instances that failed
    failed = r["failed_instances"]
    assert failed["unit"] == "instances" and failed["total"] == inst["failed"] > 0
    assert sum(failed["by_reason"].values()) == inst["failed"]
    assert sum(failed["no_valid_host_by_filter"].values()) == failed["by_reason"].get("NoValidHost", 0) > 0
    # Issue 17: disk beside vCPU and RAM, per zone and over the cloud, at the end and over time
    final = r["final"]
    assert list(final["utilization"]) == ["VCPU", "MEMORY_MB", "DISK_GB"]
    for rc in ("VCPU", "MEMORY_MB", "DISK_GB"):
        assert set(final["utilization"][rc]) == {"az1", "az2"}
        assert 0 < final["utilization_all"][rc] <= 1
        assert len(r["timeline"]["utilization"][rc]["az1"]) == len(r["timeline"]["t"])
    assert_disk_matches_the_truth(sim, r)


def overfilling(data: dict[str, Any]) -> Simulation:
    """A run whose truth accepts every claim (its room check is gone): nodes get filled past capacity."""
    sim = Simulation(parse_scenario(data))
    sim.truth._ledger.fits = lambda *args, **kwargs: None  # type: ignore[method-assign]
    return sim


def over_by_a_full_pass(sim: Simulation) -> int:
    truth = sim.truth
    over = np.zeros(truth.n, dtype=np.bool_)
    for rc in truth.rc_index:
        cap = truth.rc_col("capacity", rc)
        assert cap is not None
        over |= truth.used(rc) > cap + 1e-6
    return int(np.count_nonzero(over))


def test_an_overcommit_is_seen_when_the_claim_makes_it_not_at_the_next_full_pass() -> None:
    # Issue 16: the invariant is kept per claim (no pass over a million nodes per sample); a node pushed over
    # capacity counts from that claim on, so the timeline shows it long before the run's final audit.
    sim = overfilling(scenario_data())
    r = sim.run()
    assert r["invariants"]["overcommitted_nodes"] >= over_by_a_full_pass(sim) > 0
    seen = [s["overcommitted_nodes"] for s in sim.samples[:-1]]  # the last sample comes after the final audit
    assert seen[len(seen) // 2] > 0, "no overcommit counted before the run's end"


def test_the_final_audit_finds_every_node_over_capacity_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    # The full pass at the end stands on its own: without the per-claim check it still counts every node that is
    # over capacity when the run ends.
    monkeypatch.setattr(Overcommit, "check", lambda self, row: None)
    sim = overfilling(scenario_data())
    r = sim.run()
    assert r["invariants"]["overcommitted_nodes"] == over_by_a_full_pass(sim) > 0


def test_retries_to_alternates_never_break_a_server_group() -> None:
    # Groups everywhere, builds failing on a lost rack: retries go to alternates, none may break the policy.
    data = scenario_data(**{"policy.kind": "gantt", "workload.server_groups.probability": 0.5})
    _, r = run(data)
    assert r["retries"] > 0 and r["build_failures_dead_host"] > 0
    assert r["invariants"]["server_group_violations"] == 0


def test_a_lost_rack_receives_nothing_after_it_is_lost() -> None:
    sim, r = run(scenario_data())
    lost = r["failures"][0]
    assert lost["kind"] == "rack_lost" and lost["hosts"] == 10
    assert r["invariants"]["builds_on_lost_hosts"] == 0
    assert r["invariants"]["claims_after_detection"] == 0
    # Straight from the truth: no allocation on the rack was made after the rack went down (plus detection).
    rows = sim.layout.rack_hosts("az1-r2")
    names = {sim.layout.names[i] for i in rows.tolist()}
    detected = EPOCH + lost["at"] + sim.s.control_plane.service_down_time
    late = [a for a in sim.truth.allocations() if a.host in names and a.created_at > EPOCH + lost["at"]]
    assert not [a for a in late if a.created_at > detected]
    # And nothing built there after the loss survived: those claims were released when the build failed.
    assert not late


def test_fenced_rack_is_avoided_once_replicas_see_the_report() -> None:
    data = scenario_data(**{"failures.0.fenced": True})
    sim, r = run(data)
    assert r["invariants"]["claims_after_detection"] == 0
    assert r["failures"][0]["claims_on_dead_hosts"] <= r["failures"][0]["build_failures"]
    assert all(sim.truth.col("forced_down")[sim.layout.rack_hosts("az1-r2")])


def without_wall_clock(body: dict[str, Any]) -> str:
    assert "wall_seconds" in body.pop("wall_clock")
    return json.dumps(body, indent=1)


def test_a_run_is_reproducible_by_default() -> None:
    """Issue 17 item 8: the same scenario and seed give the same results; only the wall_clock section differs."""
    data = scenario_data()
    del data["control_plane"]["decision_time"]  # the default
    _, a = run(data, requests=800)
    _, b = run(data, requests=800)
    assert a["decision_time"] == 0.001 and a["reproducible"]
    assert without_wall_clock(a) == without_wall_clock(b)
    _, c = run(scenario_data(seed=7), requests=800)  # and the seed matters
    assert c["instances"] != a["instances"] or c["timeline"]["utilization"] != a["timeline"]["utilization"]


def test_a_measured_decision_time_is_opt_in_and_said(tmp_path: Path) -> None:
    _, r = run(scenario_data(**{"control_plane.decision_time": "measured"}), requests=200)
    assert r["decision_time"] == "measured" and not r["reproducible"]
    out = tmp_path / "m.json"
    assert main([str(EXAMPLES / "small.toml"), "--requests", "50", "--quiet", "--decision-time", "measured",
                 "--json", str(out)]) == 0
    body = json.loads(out.read_text())
    assert body["decision_time"] == "measured" and body["reproducible"] is False


def test_compare_mode_writes_both_runs_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp.json"
    code = main(["--compare", str(EXAMPLES / "contended-gantt.toml"), str(EXAMPLES / "contended-nova.toml"),
                 "--requests", "800", "--quiet", "--json", str(out), "--plots", str(tmp_path / "plots")])
    assert code == 0
    body = json.loads(out.read_text())
    assert body["a"]["policy"] == "gantt" and body["b"]["policy"] == "nova-classic"
    for side in ("a", "b"):
        assert body[side]["requests"]["total"] == 800
        assert body[side]["invariants"]["overcommitted_nodes"] == 0
    # Nova discovers conflicts at build time; Gantt at claim time, before anything is sent to a host.
    assert body["b"]["conflicts"]["build_rejections"] > 0
    assert body["a"]["conflicts"]["build_rejections"] == 0
    for kind in ("utilization", "retries", "capacity"):  # one scenario under two policies: both in the name
        assert (tmp_path / "plots" / f"contended-gantt-vs-contended-nova-classic-{kind}.png").stat().st_size > 10_000
    table = capsys.readouterr().out
    assert "contended (gantt)" in table and "contended (nova-classic)" in table


@pytest.mark.parametrize(("changes", "field"), [
    ({"cloud.hosts_per_rak": 3}, "cloud"),
    ({"cloud.hosts_per_rack": "ten"}, "cloud.hosts_per_rack"),
    ({"workload.flavors.1.vcpus": -2}, "workload.flavors[1]"),
    ({"workload.rate": 0}, "workload.rate"),
    ({"failures.0.rack": "az9-r0"}, "failures[0].rack"),
    ({"failures.2.scheduler": 7}, "failures[2].scheduler"),
    ({"policy.kind": "random"}, "policy.kind"),
    ({"policy.config.filter_scheduler.host_subset_size": "x"}, "policy.config.filter_scheduler.host_subset_size"),
    # Issue 17: an unknown filter or weigher was a traceback mid-run with exit status 1 (an invariant's)
    ({"policy.config.filter_scheduler.enabled_filters": ["NoSuchFilter"]},
     "policy.config.filter_scheduler.enabled_filters"),
    ({"policy.config.filter_scheduler.weight_classes": ["NoSuchWeigher"]},
     "policy.config.filter_scheduler.weight_classes"),
])
def test_a_bad_scenario_names_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario_data(**changes))
    assert err.value.field == field
    assert field.split("[")[0].split(".")[-1] in err.value.message


def test_cli_reports_a_bad_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text((EXAMPLES / "small.toml").read_text().replace("hosts_per_rack = 10", "hosts_per_rack = 0"))
    assert main([str(bad), "--quiet"]) == 2
    assert "hosts_per_rack" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "missing.toml")]) == 2


def test_python_dash_m_runs_a_scenario(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "m.json"
    done = subprocess.run([sys.executable, "-m", "gantt.sim", str(EXAMPLES / "small.toml"), "--requests", "200",
                           "--quiet", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["requests"]["total"] == 200


def test_seed_and_decision_time_from_the_command_line_make_a_run_reproducible(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 17 item 8: `--seed` and `--decision-time` override the scenario; a fixed time repeats a run exactly."""
    bodies = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        assert main([str(EXAMPLES / "small.toml"), "--requests", "300", "--quiet", "--seed", "5",
                     "--decision-time", "0.001", "--json", str(out)]) == 0
        bodies.append(json.loads(out.read_text()))
    assert bodies[0]["seed"] == 5 and bodies[0]["decision_time"] == 0.001
    assert without_wall_clock(bodies[0]) == without_wall_clock(bodies[1])
    assert main([str(EXAMPLES / "small.toml"), "--decision-time", "soon"]) == 2
    assert "--decision-time must be a number" in capsys.readouterr().err


def test_json_dash_writes_the_metrics_alone_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(EXAMPLES / "small.toml"), "--requests", "100", "--quiet", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["requests"]["total"] == 100  # nothing but the JSON on stdout


def test_a_long_run_can_log_its_progress_in_plain_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 16: a million-request run takes an hour; its log says how far it got and at what cost, and the JSON
    # says what building the cloud cost and the process's peak memory.
    out = tmp_path / "r.json"
    assert main([str(EXAMPLES / "small.toml"), "--requests", "2500", "--log-every", "1000", "--json", str(out)]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("small.toml (gantt): ")]
    assert "built in" in lines[0]
    logged = [line.split(": ", 1)[1].split(" requests")[0] for line in lines[1:]]
    assert logged == ["1000", "2000"]
    assert all("decided" in line and "CPU" in line and "engine" in line and "MiB" in line for line in lines[1:])
    clock = json.loads(out.read_text())["wall_clock"]
    assert clock["build_cpu_seconds"] > 0 and clock["peak_rss_mb"] > 10
    with pytest.raises(SystemExit) as refused:
        main([str(EXAMPLES / "small.toml"), "--log-every", "0"])
    assert refused.value.code == 2 and "--log-every must be >= 1" in capsys.readouterr().err


def test_the_timelines_floor_division_is_numpys_bit_for_bit() -> None:
    # Issue 16: a timeline sample's "how many of the biggest flavor fit" divides three 1,000,000-row columns;
    # numpy's float // costs ~20 ms per column, a division and a floor a few. The values must not move.
    from gantt.sim.metrics import floor_divide

    rng = np.random.default_rng(16)
    whole = rng.integers(0, 5_000_000, 100_000).astype(np.float64)
    cases = [whole, rng.random(100_000) * 1e6, whole * 0.1, np.array([0.0, 2.0**53 - 1, 5e15, 1e-300])]
    for by in (1, 2, 3, 7, 8, 32, 100, 160, 2048, 16384, 65535, 65536):
        # just below a multiple: where a rounded quotient would land on the integer if it could
        cases.append(np.nextafter(np.arange(1, 5000, dtype=np.float64) * by, 0.0))
        for values in cases:
            assert np.array_equal(floor_divide(values, by), values // by), by
