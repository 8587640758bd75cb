"""``gantt simulate SCENARIO.toml`` and ``gantt simulate --compare A.toml B.toml``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gantt.allocator import keep_freed_memory
from gantt.sim.report import print_summary, write_plots
from gantt.sim.scenario import Scenario, ScenarioError, load_scenario
from gantt.sim.simulator import Simulation


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gantt simulate",
                                description="Run the real Gantt engine against a simulated cloud on a virtual clock.")
    p.add_argument("scenario", nargs="?", help="scenario TOML file")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="run two scenarios and show them side by side")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the metrics as JSON to OUT ('-': stdout)")
    p.add_argument("--plots", metavar="DIR", help="write PNG plots to DIR")
    p.add_argument("--requests", type=int, metavar="N", help="stop after N requests (overrides the scenario)")
    p.add_argument("--seed", type=int, metavar="N", help="random seed (overrides the scenario's)")
    p.add_argument("--decision-time", metavar="SECONDS|measured",
                   help="virtual seconds a decision occupies a scheduler: a number makes runs with one seed "
                        "identical; 'measured' (the scenarios' default) uses the engine's real time, so runs differ")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _overridden(scenario: Scenario, seed: int | None, decision_time: str | None) -> Scenario:
    if seed is not None:
        scenario = msgspec.structs.replace(scenario, seed=seed)
    if decision_time is not None:
        try:
            value: float | str = decision_time if decision_time == "measured" else float(decision_time)
        except ValueError:
            raise ScenarioError("--decision-time must be a number of seconds or 'measured'",
                                field="control_plane.decision_time") from None
        if isinstance(value, float) and not (value >= 0 and value == value):
            raise ScenarioError("--decision-time must be >= 0", field="control_plane.decision_time")
        plane = msgspec.structs.replace(scenario.control_plane, decision_time=value)
        scenario = msgspec.structs.replace(scenario, control_plane=plane)
    return scenario


def _run(scenario: Scenario, label: str, *, requests: int | None, quiet: bool, console: Console) -> dict[str, Any]:
    sim = Simulation(scenario, max_requests=requests)
    total = sim.max_requests
    if quiet:
        return sim.run()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("t={task.fields[vt]:.0f}s"), TimeElapsedColumn(), console=console,
                  transient=False) as progress:
        task = progress.add_task(label, total=total, vt=0.0)

        def update(virtual: float, arrived: float) -> None:
            progress.update(task, completed=arrived, vt=virtual)

        sim.progress = update
        results = sim.run()
        progress.update(task, completed=results["requests"]["total"], vt=results["virtual_seconds"])
    return results


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["simulate"]:  # tolerate being handed the whole `gantt simulate ...` command line
        args_in = args_in[1:]
    parser = _parser()
    args = parser.parse_args(args_in)
    keep_freed_memory()
    if (args.scenario is None) == (args.compare is None):
        parser.error("give one SCENARIO.toml, or --compare A.toml B.toml")
    err = Console(stderr=True)
    out = Console()
    paths = args.compare or [args.scenario]
    try:
        scenarios = [_overridden(load_scenario(p), args.seed, args.decision_time) for p in paths]
    except ScenarioError as exc:
        err.print(f"[red]invalid scenario[/red]: {exc.message}", highlight=False)
        return 2
    results = []
    for path, scenario in zip(paths, scenarios, strict=True):
        label = f"{Path(path).name} ({scenario.policy.kind})"
        results.append(_run(scenario, label, requests=args.requests, quiet=args.quiet, console=err))
    print_summary(results, err if args.json_out == "-" else out)  # '-': stdout carries the JSON alone
    if args.json_out:
        body: Any = results[0] if len(results) == 1 else {"a": results[0], "b": results[1]}
        if args.json_out == "-":
            sys.stdout.write(json.dumps(body, indent=1) + "\n")
        else:
            Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)  # a long run must not be lost to a typo
            Path(args.json_out).write_text(json.dumps(body, indent=1))
            err.print(f"metrics written to {args.json_out}")
    if args.plots:
        for p in write_plots(results, args.plots):
            err.print(f"plot written to {p}")
    bad = [r for r in results if r["invariants"]["overcommitted_nodes"] or not r["invariants"]["conservation"]
           or r["invariants"]["claims_after_detection"] or r["invariants"]["builds_on_lost_hosts"]]
    if bad:
        err.print("[red]an invariant was violated[/red] (see the invariants section)")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
