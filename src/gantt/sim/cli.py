"""``gantt simulate SCENARIO.toml``, ``gantt simulate --compare A.toml B.toml`` and
``gantt simulate SCENARIO.toml --sweep KEY=VALUES ...``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from gantt.base.allocator import keep_freed_memory
from gantt.sim.loader import load_scenario, read_scenario_data
from gantt.sim.metrics import peak_rss_mb
from gantt.sim.report import PlotsUnavailable, print_summary, require_plots, run_title, write_plots, write_sweep_plots
from gantt.sim.scenario import Scenario, ScenarioError
from gantt.sim.simulator import Simulation
from gantt.sim.sweep import (
    format_estimate,
    headline_figures,
    invariants_hold,
    parse_axis,
    plan_sweep,
    run_sweep,
    summarize,
    sweep_csv,
)

INVALID = 2  # exit status of a bad scenario or option; 1 is an invariant that broke


class _Once(argparse.Action):
    """A pair that cannot be repeated: a second --compare is refused instead of replacing the first silently."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} may be given once")
        setattr(namespace, self.dest, values)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gantt simulate",
        description="Run the real Gantt engine against a simulated cloud on a virtual clock. A run is a function "
                    "of its scenario and seed: run it again, get the same results (wall-clock figures apart).",
        epilog="sweep KEY: seed (the replicates the 95% interval is over), hosts (the cloud's size, through "
               "cloud.racks_per_az), filters.OPTION (policy.config.filter_scheduler.OPTION), or any path into the "
               "scenario as in TOML (workload.rate, control_plane.schedulers, workload.flavors[0].weight). "
               "VALUES: a comma list of scalars and integer ranges A..B, e.g. seed=1..20 or hosts=400,800.")
    p.add_argument("scenario", nargs="?", help="scenario TOML file")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), action=_Once,
                   help="run two scenarios and show them side by side (once)")
    p.add_argument("--sweep", action="append", metavar="KEY=VALUES",
                   help="run the scenario over these values (repeat for a grid); with seed=A..B, report each "
                        "point's mean and 95%% confidence interval over the seeds (see below)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="sweep: run N simulations at once in separate processes (default 1; each holds its whole "
                        "cloud in memory). Results do not depend on N")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the metrics as JSON to OUT ('-': stdout)")
    p.add_argument("--csv", dest="csv_out", metavar="OUT",
                   help="sweep: write one row per point and figure as CSV to OUT ('-': stdout)")
    p.add_argument("--plots", metavar="DIR", help="write PNG plots to DIR, named after the scenario (and sweep point)")
    p.add_argument("--requests", type=int, metavar="N", help="stop after N requests (overrides the scenario)")
    p.add_argument("--seed", type=int, metavar="N", help="random seed (overrides the scenario's)")
    p.add_argument("--decision-time", metavar="SECONDS|measured",
                   help="virtual seconds a decision occupies a scheduler (default: the scenario's, else 0.001). "
                        "'measured' charges the engine's real time instead: bursts queue as they would, but runs "
                        "with one seed then differ")
    p.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")
    p.add_argument("--log-every", type=int, metavar="N",
                   help="instead of the bar, a plain line on stderr at most every N requests (requests arrived "
                        "and decided, virtual time, wall and CPU seconds, the engine's CPU seconds, peak RSS; "
                        "looked at each 1,000 "
                        "requests and each timeline sample): for long runs into a log file")
    return p


def _decision_time(text: str) -> float | str:
    if text == "measured":
        return text
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError("--decision-time must be a number of seconds or 'measured'",
                            field="control_plane.decision_time") from None
    if not value >= 0 or value == float("inf"):  # also refuses NaN
        raise ScenarioError("--decision-time must be a finite number >= 0", field="control_plane.decision_time")
    return value


def _overridden(scenario: Scenario, seed: int | None, decision_time: float | str | None) -> Scenario:
    if seed is not None:
        scenario = msgspec.structs.replace(scenario, seed=seed)
    if decision_time is not None:
        plane = msgspec.structs.replace(scenario.control_plane, decision_time=decision_time)
        scenario = msgspec.structs.replace(scenario, control_plane=plane)
    return scenario


@contextmanager
def _progress(console: Console, quiet: bool, description: str, total: float | None, unit: str,
              extra: str = "") -> Iterator[Callable[..., None] | None]:
    """A progress bar with the time remaining, or nothing when quiet or when stderr is not a terminal (a log file
    would fill with redraws)."""
    if quiet or not console.is_terminal:
        yield None
        return
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit)]
    if extra:
        columns.append(TextColumn(extra))
    columns += [TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total, vt=0.0)

        def update(completed: float, **fields: Any) -> None:
            progress.update(task, completed=completed, **fields)

        yield update


def _log_lines(sim: Simulation, label: str, every: int, console: Console) -> Callable[[float, float], None]:
    """A progress callback printing one line per ``every`` requests (the simulator calls it each 1,000)."""
    began_wall, began_cpu = time.perf_counter(), time.process_time()
    last = [0]
    console.print(f"{label}: built in {sim.build_wall:.1f} s wall, {sim.build_cpu:.1f} s CPU; "
                  f"peak RSS {peak_rss_mb():.0f} MiB", highlight=False)

    def log(virtual: float, arrived: float) -> None:
        if arrived - last[0] < every:
            return
        last[0] = int(arrived) - int(arrived) % every
        # decisions beside arrivals: in a burst past the schedulers' rate, arrivals run ahead in a queue
        console.print(f"{label}: {int(arrived)} requests, {len(sim.engine_ms)} decided, virtual {virtual:.1f} s, wall "
                      f"{time.perf_counter() - began_wall:.1f} s, CPU {time.process_time() - began_cpu:.1f} s "
                      f"(engine {sim.engine_cpu:.1f} s), peak RSS {peak_rss_mb():.0f} MiB", highlight=False)

    return log


def _run(scenario: Scenario, label: str, *, requests: int | None, quiet: bool, console: Console,
         log_every: int | None = None) -> dict[str, Any]:
    sim = Simulation(scenario, max_requests=requests)
    if log_every is not None:
        sim.progress = _log_lines(sim, label, log_every, console)
        return sim.run()
    by_requests = sim.max_requests is not None
    # A run ends after its requests, or after its duration: the bar counts whichever bounds it.
    total = float(sim.max_requests) if sim.max_requests is not None else sim.expected_duration
    with _progress(console, quiet, label, total, "requests" if by_requests else "virtual s",
                   "t={task.fields[vt]:.0f}s" if by_requests else "") as update:
        if update is not None:
            def progress(virtual: float, arrived: float) -> None:
                update(arrived if by_requests else min(virtual, total), vt=virtual)

            sim.progress = progress
        results = sim.run()
        if update is not None:
            update(results["requests"]["total"] if by_requests else total, vt=results["virtual_seconds"])
    return results


def _write(text: str, out: str, what: str, err: Console) -> None:
    if out == "-":
        sys.stdout.write(text)
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)  # a long run must not be lost to a typo
    Path(out).write_text(text)
    err.print(f"{what} written to {out}")


def _table_console(to_stderr: bool, err: Console) -> Console:
    """Where the table goes: stdout, or stderr when stdout carries JSON or CSV. Piped, a file has room: the
    columns are not folded to 80 characters."""
    out = err if to_stderr else Console()
    return out if out.is_terminal else Console(stderr=to_stderr, width=240)


def _sweep(args: argparse.Namespace, err: Console, decision_time: float | str | None) -> int:
    try:
        axes = [parse_axis(text) for text in args.sweep]
        plan = plan_sweep(read_scenario_data(args.scenario), axes, args.scenario, seed=args.seed,
                          decision_time=decision_time)
    except ScenarioError as exc:
        err.print(f"[red]invalid sweep[/red]: {exc.message}", highlight=False)
        return INVALID
    label = f"{plan.name}: {len(plan.points)} point(s) × {len(plan.seeds)} seed(s)"
    with _progress(err, args.quiet, label, plan.runs, "runs") as update:
        results = run_sweep(plan, max_requests=args.requests, jobs=args.jobs,
                            done=None if update is None else lambda n: update(n))
    summary = summarize(plan, results)
    stdout_taken = "-" in (args.json_out, args.csv_out)
    console = _table_console(stdout_taken, err)
    console.print(sweep_table(summary))
    if summary["differences"]:
        console.print(differences_table(summary))
    if args.json_out:
        _write(json.dumps(summary, indent=1) + "\n", args.json_out, "sweep metrics", err)
    if args.csv_out:
        _write(sweep_csv(summary), args.csv_out, "sweep CSV", err)
    if args.plots:
        for path in write_sweep_plots(summary, [runs[0] for runs in results], args.plots):
            err.print(f"plot written to {path}")
    if not all(p["invariants_hold"] for p in summary["points"]):
        bad = [p["label"] for p in summary["points"] if not p["invariants_hold"]]
        err.print(f"[red]an invariant was violated[/red] at {', '.join(bad)}")
        return 1
    return 0


def sweep_table(summary: dict[str, Any]) -> Table:
    seeds = summary["sweep"]["seeds"]
    over = (f"mean ± 95% CI half-width, Student t over {len(seeds)} seeds ({seeds[0]}..{seeds[-1]})"
            if len(seeds) > 1 else f"one run per point (seed {seeds[0]}): no interval")
    table = Table(title=f"Sweep of {run_title(summary)}: {over}")
    table.add_column("figure", style="bold")
    table.add_column("unit")
    points = summary["points"]
    for point in points:
        table.add_column(point["label"], justify="right")
    for key, entry in points[0]["figures"].items():
        table.add_row(entry["label"], entry["unit"], *(format_estimate(p["figures"][key]) for p in points))
    return table


def headline_deltas(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """The sweep's headline figures, B minus A (one run each: no interval; a sweep over seeds gives one)."""
    return {fig.key: float(fig.value(b)) - float(fig.value(a)) for fig in headline_figures([a, b])}


def differences_table(summary: dict[str, Any]) -> Table:
    """Each point against the first, paired seed by seed (``sweep.paired_differences``)."""
    diffs = summary["differences"]
    seeds = summary["sweep"]["seeds"]
    table = Table(title=f"Paired differences against {diffs[0]['baseline']}, seed by seed: mean ± 95% CI, "
                        f"Student t over {len(seeds)} seeds")
    table.add_column("figure", style="bold")
    table.add_column("unit")
    for diff in diffs:
        table.add_column(f"Δ {diff['point']}", justify="right")
    for key, entry in diffs[0]["figures"].items():
        table.add_row(entry["label"], entry["unit"],
                      *(format_estimate(d["figures"][key], signed=True) for d in diffs))
    return table


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["simulate"]:  # tolerate being handed the whole `gantt simulate ...` command line
        args_in = args_in[1:]
    parser = _parser()
    args = parser.parse_args(args_in)
    keep_freed_memory()
    if (args.scenario is None) == (args.compare is None):
        parser.error("give one SCENARIO.toml, or --compare A.toml B.toml")
    if args.sweep and args.compare:
        parser.error("--sweep runs one scenario; it cannot be combined with --compare")
    if args.csv_out and not args.sweep:
        parser.error("--csv writes a sweep's table: give --sweep too (a single run's metrics: --json)")
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    if args.jobs > 1 and not args.sweep:
        parser.error("--jobs runs a sweep's simulations in parallel: give --sweep too")
    if args.json_out == "-" and args.csv_out == "-":
        parser.error("--json - and --csv - cannot both write to stdout")
    if args.requests is not None and args.requests < 0:
        parser.error("--requests must be >= 0")
    if args.log_every is not None and args.log_every < 1:
        parser.error("--log-every must be >= 1")
    if args.log_every is not None and args.sweep:
        parser.error("--log-every logs one run's progress: a sweep shows its runs on the bar")
    err = Console(stderr=True, soft_wrap=True)  # a long path printed whole, not folded
    if args.plots:
        try:  # before the runs, not after minutes of simulation
            require_plots()
        except PlotsUnavailable as exc:
            err.print(f"[red]--plots[/red]: {escape(str(exc))}", highlight=False)
            return INVALID
    try:
        decision_time = None if args.decision_time is None else _decision_time(args.decision_time)
    except ScenarioError as exc:
        err.print(f"[red]invalid option[/red]: {exc.message}", highlight=False)
        return INVALID
    if args.sweep:
        return _sweep(args, err, decision_time)
    paths = args.compare or [args.scenario]
    try:
        scenarios = [_overridden(load_scenario(p), args.seed, decision_time) for p in paths]
    except ScenarioError as exc:
        err.print(f"[red]invalid scenario[/red]: {exc.message}", highlight=False)
        return INVALID
    results = []
    for path, scenario in zip(paths, scenarios, strict=True):
        label = f"{Path(path).name} ({scenario.policy.kind})"
        results.append(_run(scenario, label, requests=args.requests, quiet=args.quiet, console=err,
                            log_every=args.log_every))
    print_summary(results, _table_console(args.json_out == "-", err))  # '-': stdout carries the JSON alone
    if args.json_out:
        body: Any = results[0] if len(results) == 1 else {"a": results[0], "b": results[1],
                                                         "delta_b_minus_a": headline_deltas(results[0], results[1])}
        _write(json.dumps(body, indent=1) + "\n", args.json_out, "metrics", err)
    if args.plots:
        for p in write_plots(results, args.plots):
            err.print(f"plot written to {p}")
    if not all(invariants_hold(r) for r in results):
        err.print("[red]an invariant was violated[/red] (see the invariants section)")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
