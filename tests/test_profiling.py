"""``--profile`` on the benchmarks (issue 35 item 4): where the time goes per phase, from py-spy sampling a served
process and from cProfile in process, summed per function."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from gantt.bench.profiling import (
    Phases,
    Sampler,
    ThreadProfiles,
    collapsed_summary,
    stats_summary,
    subtract_rows,
)

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


def _thread_spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _seconds_under(rows: dict, function: str) -> float:
    return sum(ct for (_, _, name), (_, _, _, ct, _) in rows.items() if name == function)


def test_every_thread_started_after_start_is_profiled_by_its_cpu_and_read_while_it_runs() -> None:
    """bench/cluster.py's ``--profile``: the threads a replica starts (its clients, committer, watch, feed), each
    under its own cProfile timed by the thread's CPU, read together without stopping the ones still running."""
    before = threading.Thread(target=_thread_spin, args=(0.05,), name="before")
    before.start()  # started before: not profiled
    profiles = ThreadProfiles().start()
    stop = threading.Event()

    def sleeper() -> None:
        time.sleep(0.3)

    def runner() -> None:  # still running when the profiles are read
        while not stop.is_set():
            _thread_spin(0.01)

    threads = [threading.Thread(target=_thread_spin, args=(0.2,), name=f"Thread-{i} (spinner)") for i in (1, 2)]
    threads += [threading.Thread(target=sleeper, name="sleeper"), threading.Thread(target=runner, name="runner7")]
    try:
        for t in threads:
            t.start()
        for t in threads[:3]:
            t.join()
        time.sleep(0.05)
        rows = profiles.rows()
        after = threading.Thread(target=_thread_spin, args=(0.05,), name="after")  # started once read: not profiled
        after.start()
        after.join()
    finally:
        stop.set()
        before.join()
        threads[3].join()
    assert set(rows) == {"spinner", "sleeper", "runner"}  # named as bench/cluster.py names threads
    assert 0.4 <= _seconds_under(rows["spinner"], "_thread_spin") < 1.0  # both spinners, summed
    assert _seconds_under(rows["runner"], "_thread_spin") > 0.02
    # CPU, not wall: the sleeper's 0.3 s asleep count for (almost) nothing
    assert sum(tt for _, _, tt, _, _ in rows["sleeper"].values()) < 0.05
    summary = stats_summary(rows["spinner"])
    assert any(e["function"].startswith("_thread_spin (test_profiling.py)") for e in summary["total"][:3])


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


def test_a_snapshot_subtracted_leaves_what_ran_after_it() -> None:
    """bench/app_cpu.py's ``--profile``: the profiles run through setup and the measured rounds; a snapshot taken
    between them (``rows(stop=False)``, the hook kept for threads started later) subtracted from the end's rows
    leaves the rounds alone."""
    profiles = ThreadProfiles().start()
    release = threading.Event()

    def worker() -> None:
        _thread_spin(0.15)  # setup
        release.wait()
        _spin_after(0.1)  # the measured part

    thread = threading.Thread(target=worker, name="Thread-4 (worker)")
    thread.start()
    try:
        time.sleep(0.05)
        while _seconds_under(profiles.rows(stop=False).get("worker", {}), "_thread_spin") < 0.1:
            time.sleep(0.02)
        before = profiles.rows(stop=False)
        late = threading.Thread(target=_thread_spin, args=(0.05,), name="late")  # the hook still installed
        late.start()
        late.join()
        release.set()
        thread.join()
        after = profiles.rows()
    finally:
        release.set()
        thread.join()
    measured = subtract_rows(after["worker"], before["worker"])
    assert _seconds_under(measured, "_thread_spin") < 0.02  # setup's 0.15 s subtracted
    assert 0.08 <= _seconds_under(measured, "_spin_after") < 0.5
    assert _seconds_under(after["late"], "_thread_spin") > 0.03


def _spin_after(seconds: float) -> None:
    _thread_spin_inner(seconds)


def _thread_spin_inner(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_in_process_benchmark_prints_its_threads_top_functions() -> None:
    """bench/app_cpu.py ``--profile``: placements with their release under the app, the event loop's and the
    writer's top functions; the loop's show the decision (the engine) and both handlers."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "app_cpu.py"), "--hosts", "300", "--placements",
                           "200", "--rounds", "1", "--release", "--profile"], capture_output=True, text=True,
                          timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    profile = result["profile"]
    assert {"all", "loop", "gantt-sqlite-writer"} <= set(profile), sorted(profile)
    loop = {e["function"] for e in profile["loop"]["total"]}
    assert {"select_destinations (handlers.py)", "select_steps (engine.py)"} <= loop, sorted(loop)
    writer = {e["function"] for e in profile["gantt-sqlite-writer"]["total"]}
    assert "commit_group (sqlite_writer.py)" in writer, sorted(writer)
    assert result["rounds"][0]["switches"] > 0
