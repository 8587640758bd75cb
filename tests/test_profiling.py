"""``--profile`` on the benchmarks (issue 35 item 4): where the time goes per phase, from py-spy sampling a served
process and from cProfile in process, summed per function."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from gantt.bench.profiling import Phases, Sampler, collapsed_summary

ROOT = Path(__file__).resolve().parents[1]


def test_stacks_are_summed_per_function_by_own_and_total_samples() -> None:
    lines = ['process 7:"python -m gantt serve";main (gantt/cli/__init__.py:10);decide (gantt/compute/engine.py:5);'
             'rank (gantt/compute/ranking.py:7) 6',
             'process 7:"python -m gantt serve";main (gantt/cli/__init__.py:10);decide (gantt/compute/engine.py:9) 3',
             'process 8:"python -m gantt serve";main (gantt/cli/__init__.py:11);'
             'report (gantt/compute/state/reports.py:2);loads (json/decoder.py:3) 1',
             "garbage"]
    summary = collapsed_summary(lines)
    assert summary["samples"] == 10
    assert [(e["function"], e["samples"]) for e in summary["self"]] == [
        ("rank (gantt/compute/ranking.py)", 6), ("decide (gantt/compute/engine.py)", 3), ("loads (json/decoder.py)", 1)]
    total = {e["function"]: e["share"] for e in summary["total"]}
    # lines of one function and processes are summed; totals name Gantt's functions below the process's entry
    assert total == {"decide (gantt/compute/engine.py)": 0.9, "rank (gantt/compute/ranking.py)": 0.6,
                     "report (gantt/compute/state/reports.py)": 0.1}
    # a stack counts once per package it runs through
    assert summary["packages"] == {"cli": 1.0, "compute": 1.0}


def _spin(seconds: float) -> int:
    end, n = time.process_time() + seconds, 0
    while time.process_time() < end:
        n += 1
    return n


def test_an_in_process_phase_names_its_hot_function() -> None:
    phases = Phases()
    with phases.phase("busy"):
        _spin(0.2)
    with phases.phase("idle"):
        time.sleep(0.01)
    summary = phases.summary()
    assert set(summary) == {"busy", "idle"}
    assert any(e["function"].startswith("_spin (test_profiling.py)") for e in summary["busy"]["self"][:3])


def test_a_served_process_is_sampled_from_outside() -> None:
    script = textwrap.dedent("""
        import time
        def hot_loop_for_the_sampler():
            end = time.process_time() + 30
            while time.process_time() < end:
                pass
        print("ready", flush=True)
        hot_loop_for_the_sampler()
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with Sampler(child.pid) as sampler:
            time.sleep(1.5)
    finally:
        child.kill()
        child.wait()
    summary = sampler.summary
    assert summary is not None and summary["samples"] > 20, summary
    assert summary["self"][0]["function"].startswith("hot_loop_for_the_sampler"), summary["self"][:3]


def test_the_http_benchmark_prints_the_servers_top_functions_per_phase() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "http_api.py"), "--hosts", "300", "--duration", "2",
                           "--single-reports", "300", "--placements", "400", "--warmup", "50", "--workers", "1",
                           "--profile", "--json"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    [run] = json.loads(done.stdout)["per_run"]
    profile = run["profile"]
    assert set(profile) == {"single_reports", "placements"}
    for phase in profile.values():
        assert phase["samples"] > 0 and phase["self"] and phase["total"]
    # the placements phase ran the engine: its decision (gantt/compute/: engine, ranking, order, claim, masks…)
    # appears on the sampled stacks, and a report phase's does not need to
    # (by package: on a loaded machine the top functions of so short a phase can all be the service's)
    assert profile["placements"]["packages"].get("compute", 0) > 0, profile["placements"]
