"""bench/engine.py --uniform runs: decisions in the HTTP benchmarks' cloud, releasing beyond what it holds."""

from __future__ import annotations

from gantt.bench.engine import uniform_benchmark


def test_uniform_benchmark_places_and_releases_in_a_small_cloud() -> None:
    # 20 hosts of 32 vCPUs hold 640 one-vCPU instances: 900 placements over 3 rounds fit only because the
    # oldest beyond 50 are released (a NoValidHost would fail the run)
    result = uniform_benchmark(20, 300, rounds=3, hold=50)
    figures = result["decision_cpu_ms"]
    assert result["hosts"] == 20 and result["rounds"] == 3
    assert 0 < figures["p50"] <= figures["p99"]
