"""Sweeps: one scenario run over a grid of parameter values, each point over several seeds, summarized as the
mean and a 95 % confidence interval (Student t over the seeds) of the headline figures.

``--sweep KEY=VALUES`` (repeatable; several axes make a grid, their cartesian product):

- ``seed=1..20`` — the replicates: every point runs once per seed, and the interval is over them. Without a seed
  axis each point runs once, with the scenario's seed (or ``--seed``), and has no interval.
- ``hosts=1000,2000`` — the cloud's size: sets ``cloud.racks_per_az`` (the number must be a multiple of zones ×
  ``hosts_per_rack``).
- ``filters.OPTION=…`` — short for ``policy.config.filter_scheduler.OPTION`` (``filters.host_subset_size=1,3``).
- any other KEY is a path into the scenario file as written in TOML: ``workload.rate=5,10``,
  ``control_plane.schedulers=1,2,4``, ``workload.flavors[0].weight=1,5``, ``policy.kind=gantt,nova-classic``.

VALUES is a comma-separated list of TOML scalars (``10``, ``0.5``, ``true``, ``"a b"``; a bare word is a string)
and integer ranges ``A..B`` (both ends included), mixed at will: ``1..4,8,16``.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import multiprocessing
import re
import tomllib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import msgspec

from gantt.sim.loader import parse_scenario
from gantt.sim.report import class_label
from gantt.sim.scenario import Cloud, Scenario, ScenarioError
from gantt.sim.simulator import Simulation
from gantt.sim.stats import mean_ci, t_quantile

__all__ = ["Axis", "SweepPlan", "parse_axis", "plan_sweep", "run_sweep", "summarize", "sweep_csv"]

STATISTIC = ("mean over seeds; ci95 = mean ± t(0.975, n-1) · s / √n, Student t, s the sample standard deviation "
             "(n - 1 denominator), ci95_low and ci95_high cut to the figure's range (no count below 0, no share "
             "above 100 %); no interval when n = 1")
DIFFERENCE = ("paired over the seeds: per seed, the point's figure minus the baseline's (the first point) on the same "
              "seed; mean and Student t ci95 of those differences (not cut: a difference may be negative)")
LEVEL = 0.95
PathPart = str | int
_RANGE_RE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_PATH_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


@dataclass(frozen=True)
class Axis:
    key: str  # as the user wrote it: the name of the parameter in every output
    path: tuple[PathPart, ...]  # into the scenario document; ("hosts",) is the cloud-size shorthand
    values: tuple[Any, ...]


def _error(message: str) -> ScenarioError:
    return ScenarioError(f"--sweep: {message}", field="--sweep")


def _scalar(text: str) -> Any:
    """One TOML scalar (a bare word is a string)."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if isinstance(value, dict | list):
        raise _error(f"{text!r}: only scalars can be swept (numbers, booleans, strings)")
    return value


def parse_values(text: str) -> tuple[Any, ...]:
    values: list[Any] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise _error(f"empty value in {text!r}")
        match = _RANGE_RE.match(item)
        if match:
            first, last = int(match.group(1)), int(match.group(2))
            if last < first:
                raise _error(f"range {item!r} runs backwards")
            if last - first >= 100_000:
                raise _error(f"range {item!r} has more than 100,000 values")
            values.extend(range(first, last + 1))
        else:
            values.append(_scalar(item))
    if len(set(map(repr, values))) != len(values):
        raise _error(f"{text!r} repeats a value")
    return tuple(values)


def _path(key: str) -> tuple[PathPart, ...]:
    if key.startswith("filters."):
        key = "policy.config.filter_scheduler." + key.removeprefix("filters.")
    parts: list[PathPart] = []
    for segment in key.split("."):
        matches = list(_PATH_RE.finditer(segment))
        if not segment or not matches or "".join(m.group(0) for m in matches) != segment or matches[0].group(1) \
                is None:
            raise _error(f"{key!r} is not a path like workload.rate or workload.flavors[0].weight")
        for m in matches:
            parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
    return tuple(parts)


def parse_axis(text: str) -> Axis:
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise _error(f"{text!r} must be KEY=VALUES (e.g. seed=1..20, hosts=1000,2000, filters.host_subset_size=1,3)")
    axis = Axis(key=key, path=_path(key), values=parse_values(values))
    if axis.path == ("seed",) and not all(isinstance(v, int) and not isinstance(v, bool) for v in axis.values):
        raise _error("seed values must be integers")
    if axis.path == ("hosts",) and not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                           for v in axis.values):
        raise _error("hosts values must be positive integers")
    return axis


def _set(data: dict[str, Any], path: tuple[PathPart, ...], value: Any, key: str) -> None:
    node: Any = data
    for depth, part in enumerate(path[:-1]):
        following = path[depth + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise _error(f"{key}: no element [{part}] there")
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise _error(f"{key}: {part!r} is not inside a table")
        if part not in node:
            if isinstance(following, int):
                raise _error(f"{key}: the scenario has no {part!r} list")
            node[part] = {}
        node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise _error(f"{key}: no element [{last}] there")
    elif not isinstance(node, dict):
        raise _error(f"{key}: {last!r} is not inside a table")
    node[last] = value


_CLOUD_DEFAULTS = {f.name: f.default for f in msgspec.structs.fields(Cloud)}


def _set_hosts(data: dict[str, Any], hosts: int) -> None:
    cloud = data.setdefault("cloud", {})
    zones = len(cloud.get("azs", ["az1"]))
    per_rack = cloud.get("hosts_per_rack", _CLOUD_DEFAULTS["hosts_per_rack"])
    if not isinstance(per_rack, int) or per_rack < 1 or hosts % (zones * per_rack):
        raise _error(f"hosts={hosts}: not a multiple of {zones} zone(s) × {per_rack} hosts per rack "
                     "(sweep cloud.racks_per_az or cloud.hosts_per_rack instead)")
    cloud["racks_per_az"] = hosts // (zones * per_rack)


@dataclass
class Point:
    parameters: dict[str, Any]  # axis key -> value, in the order the axes were given
    label: str
    scenarios: list[Scenario]  # one per seed


@dataclass
class SweepPlan:
    name: str
    axes: list[Axis]
    seeds: list[Any]  # ints once every point has been validated
    points: list[Point]

    @property
    def runs(self) -> int:
        return len(self.seeds) * len(self.points)


def plan_sweep(data: dict[str, Any], axes: list[Axis], source: str, *, seed: int | None = None,
               decision_time: float | str | None = None) -> SweepPlan:
    """Every (point, seed) validated before anything runs: one bad combination refuses the whole sweep."""
    keys = [a.path for a in axes]
    if len(set(keys)) != len(keys):
        raise _error("an axis is given twice")
    seed_axes = [a for a in axes if a.path == ("seed",)]
    if seed_axes and seed is not None:
        raise _error("give the seeds either with --seed or with --sweep seed=…, not both")
    grid = [a for a in axes if a.path != ("seed",)]
    if ("hosts",) in keys and ("cloud", "racks_per_az") in keys:
        raise _error("hosts sets cloud.racks_per_az: sweep one or the other")
    base = msgspec.json.decode(msgspec.json.encode(data))  # a deep copy the axes can write into
    if decision_time is not None:
        base.setdefault("control_plane", {})["decision_time"] = decision_time
    # (the scenario's own seed is validated with the rest of it below)
    seeds = list(seed_axes[0].values) if seed_axes else [seed if seed is not None else data.get("seed", 0)]
    points: list[Point] = []
    for combo in itertools.product(*(a.values for a in grid)):
        point_data = msgspec.json.decode(msgspec.json.encode(base))
        hosts: int | None = None
        for axis, value in zip(grid, combo, strict=True):
            if axis.path == ("hosts",):
                hosts = value
            else:
                _set(point_data, axis.path, value, axis.key)
        if hosts is not None:  # after the others: hosts_per_rack or azs may be swept too
            _set_hosts(point_data, hosts)
        parameters = {a.key: v for a, v in zip(grid, combo, strict=True)}
        label = " ".join(f"{k}={v}" for k, v in parameters.items()) or "all"
        scenarios = []
        for s in seeds:
            point_data["seed"] = s
            try:
                scenarios.append(parse_scenario(msgspec.json.decode(msgspec.json.encode(point_data)), source))
            except ScenarioError as exc:  # say which point of the grid the scenario cannot run at
                raise ScenarioError(f"at {label} seed={s}: {exc.message}", field=exc.field) from None
        points.append(Point(parameters=parameters, label=label, scenarios=scenarios))
    return SweepPlan(name=points[0].scenarios[0].name, axes=axes, seeds=seeds, points=points)


def _run_one(scenario: Scenario, max_requests: int | None) -> dict[str, Any]:
    return Simulation(scenario, max_requests=max_requests).run()


def run_sweep(plan: SweepPlan, *, max_requests: int | None, jobs: int,
              done: Callable[[int], None] | None = None) -> list[list[dict[str, Any]]]:
    """The results, ``[point][seed]``. ``jobs`` > 1 runs that many processes; each run is a function of its own
    scenario and seed, so the results do not depend on ``jobs`` or on the order runs finish in."""
    tasks = [(p, k) for p in range(len(plan.points)) for k in range(len(plan.seeds))]
    results: list[list[dict[str, Any]]] = [[{} for _ in plan.seeds] for _ in plan.points]
    finished = 0
    if jobs <= 1 or len(tasks) == 1:
        for p, k in tasks:
            results[p][k] = _run_one(plan.points[p].scenarios[k], max_requests)
            finished += 1
            if done is not None:
                done(finished)
        return results
    # spawn, not fork: the parent may hold threads (the progress display) that a forked child would inherit stuck
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=multiprocessing.get_context("spawn")) \
            as pool:
        futures = {pool.submit(_run_one, plan.points[p].scenarios[k], max_requests): (p, k) for p, k in tasks}
        for future in as_completed(futures):
            p, k = futures[future]
            results[p][k] = future.result()
            finished += 1
            if done is not None:
                done(finished)
    return results


# -------------------------------------------------------------------------------------- headline figures

@dataclass(frozen=True)
class Headline:
    key: str
    label: str
    unit: str
    value: Callable[[dict[str, Any]], float]

    @property
    def bounds(self) -> tuple[float, float | None]:
        """The range the figure's true mean lies in: every figure is a count, a share or a time, none negative,
        and a share is at most 100 %. Cutting the t interval to it keeps its coverage (the mean is inside it
        whenever it is inside the interval) and drops the impossible part, "stranded vCPU 14.3 ± 33.1" going
        below 0."""
        return 0.0, (100.0 if self.unit.startswith("%") else None)


def _failed_by(reason: str, r: dict[str, Any]) -> Any:
    return r["failed_instances"]["by_reason"].get(reason, 0)


def _final_percent(figure: str, rc: str, r: dict[str, Any]) -> float:
    return float(100.0 * r["final"][figure].get(rc, 0.0))


def headline_figures(runs: list[dict[str, Any]]) -> list[Headline]:
    """The figures a sweep summarizes. Classes and failure reasons are those any run has (0 where one lacks)."""
    reasons = sorted({reason for r in runs for reason in r["failed_instances"]["by_reason"]})
    classes: list[str] = []
    for r in runs:
        classes.extend(rc for rc in r["final"]["utilization_all"] if rc not in classes)
    figures = [
        Headline("requests.placed", "requests placed", "requests", lambda r: r["requests"]["placed"]),
        Headline("requests.failed", "requests failed", "requests", lambda r: r["requests"]["failed"]),
        Headline("requests.partial", "requests partly placed", "requests", lambda r: r["requests"]["partial"]),
        Headline("instances.placed", "instances placed", "instances", lambda r: r["instances"]["placed"]),
        Headline("instances.failed", "instances failed", "instances", lambda r: r["instances"]["failed"]),
    ]
    figures += [Headline(f"failed_instances.{reason}", f"instances failed: {reason}", "instances",
                         functools.partial(_failed_by, reason)) for reason in reasons]
    figures += [Headline(f"utilization.{rc}", f"{class_label(rc)} utilization at the end", "% of capacity",
                         functools.partial(_final_percent, "utilization_all", rc)) for rc in classes]
    figures += [Headline(f"stranded.{rc}", f"stranded {class_label(rc)} at the end", "% of free",
                         functools.partial(_final_percent, "stranded", rc)) for rc in classes]
    figures += [
        Headline("fragmentation", "fragmentation at the end", "% of free vCPU",
               lambda r: 100.0 * r["final"]["fragmentation"]),
        Headline("retries", "retries (alternates tried)", "instances", lambda r: r["retries"]),
        Headline("conflicts.claim_conflicts", "claim conflicts", "claims", lambda r: r["conflicts"]["claim_conflicts"]),
        Headline("conflicts.build_rejections", "build rejections", "builds",
               lambda r: r["conflicts"]["build_rejections"]),
        Headline("redelivered", "re-decided after a scheduler crash", "requests", lambda r: r["redelivered"]),
        Headline("decision_latency.p99_ms", "decision latency p99 (virtual)", "ms",
               lambda r: r["decision_latency"]["p99_ms"]),
        Headline("time_to_active.p99_s", "time to active p99 (virtual)", "s",
               lambda r: r["time_to_active"]["p99_ms"] / 1000.0),
        Headline("invariants.overcommitted_nodes", "overcommitted nodes (must be 0)", "nodes",
               lambda r: r["invariants"]["overcommitted_nodes"]),
        Headline("invariants.server_group_violations", "server group violations", "requests",
               lambda r: r["invariants"]["server_group_violations"]),
    ]
    return figures


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def invariants_hold(r: dict[str, Any]) -> bool:
    inv = r["invariants"]
    return not (inv["overcommitted_nodes"] or not inv["conservation"] or inv["claims_after_detection"]
                or inv["builds_on_lost_hosts"] or inv.get("numa_overbooked_nodes") or inv.get("pci_overbooked_nodes")
                or inv.get("volume_pools_over_capacity") or inv.get("volume_claims_on_lost_pools_after_detection"))


def _estimate(values: list[float], bounds: tuple[float, float | None] = (float("-inf"), None)) -> dict[str, Any]:
    """Mean, Student t half-width and the interval's ends (cut to ``bounds``) of ``values``."""
    mean, half = mean_ci(values, LEVEL)
    low, high = bounds
    return {
        "n": len(values), "mean": _round(mean),
        "ci95_half_width": None if half is None else _round(half),
        "ci95_low": None if half is None else _round(max(low, mean - half)),
        "ci95_high": None if half is None else _round(mean + half if high is None else min(high, mean + half)),
        "values": [_round(v) for v in values],
    }


def paired_differences(points: list[Any], results: list[list[dict[str, Any]]],
                       figures: list[Headline]) -> list[dict[str, Any]]:
    """Each point after the first against the first, seed by seed (every point runs the same seeds, so a
    policy or option compared on them is compared on the same arrivals and failures): the mean difference and
    its interval, far narrower than the two points' own intervals side by side when the seeds drive most of the
    spread. Empty with one point or one seed."""
    if len(points) < 2 or len(results[0]) < 2:
        return []
    base = results[0]
    out = []
    for point, runs in zip(points[1:], results[1:], strict=True):
        figs = {}
        for fig in figures:
            diffs = [float(fig.value(r)) - float(fig.value(b)) for r, b in zip(runs, base, strict=True)]
            figs[fig.key] = {"label": fig.label, "unit": fig.unit, **_estimate(diffs)}
        out.append({"point": point.label, "baseline": points[0].label, "figures": figs})
    return out


def _common(values: list[Any]) -> Any:
    distinct: list[Any] = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return distinct[0] if len(distinct) == 1 else distinct


def summarize(plan: SweepPlan, results: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The sweep as JSON: per point, each figure's mean, 95 % interval and per-seed values. Everything outside
    ``wall_clock`` repeats exactly when the sweep is run again."""
    every = [r for runs in results for r in runs]
    figures = headline_figures(every)
    n = len(plan.seeds)
    points = []
    for point, runs in zip(plan.points, results, strict=True):
        summary: dict[str, Any] = {}
        for fig in figures:
            values = [float(fig.value(r)) for r in runs]
            summary[fig.key] = {"label": fig.label, "unit": fig.unit, **_estimate(values, fig.bounds)}
        points.append({"label": point.label, "parameters": point.parameters, "hosts": runs[0]["hosts"],
                       "invariants_hold": all(invariants_hold(r) for r in runs), "figures": summary})
    return {
        "scenario": plan.name,
        "policy": _common([r["policy"] for r in every]),  # a list when the sweep varies it
        "decision_time": _common([r["decision_time"] for r in every]),
        "reproducible": all(r["reproducible"] for r in every),
        "sweep": {"axes": {a.key: list(a.values) for a in plan.axes if a.path != ("seed",)},
                  "seeds": plan.seeds, "runs": plan.runs,
                  "statistic": STATISTIC, "difference": DIFFERENCE,
                  "t": None if n < 2 else _round(t_quantile(0.5 + LEVEL / 2, n - 1))},
        "points": points,
        "differences": paired_differences(plan.points, results, figures),
        "wall_clock": {
            "note": "real time on this machine; differs between runs (everything else does not)",
            "run_wall_seconds": _round(sum(r["wall_clock"]["wall_seconds"] for r in every)),
            "run_cpu_seconds": _round(sum(r["wall_clock"]["cpu_seconds"] for r in every)),
        },
    }


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}" if abs(x) >= 10 else f"{x:,.2f}"


def format_estimate(entry: dict[str, Any], signed: bool = False) -> str:
    """``mean ± half-width``; ``mean [low, high]`` when the interval was cut to the figure's range; the mean
    alone when one seed gives no interval. ``signed``: a difference, shown with its sign."""
    mean, half = entry["mean"], entry["ci95_half_width"]
    text = ("+" if signed and mean > 0 else "") + _number(mean)
    if half is None:
        return text
    if entry["ci95_low"] > _round(mean - half) or entry["ci95_high"] < _round(mean + half):
        return f"{text} [{_number(entry['ci95_low'])}, {_number(entry['ci95_high'])}]"
    return f"{text} ± {_number(half)}"


def sweep_csv(summary: dict[str, Any]) -> str:
    """One row per point and figure, then one per paired difference and figure (its point named
    ``point − baseline``)."""
    keys = list(summary["sweep"]["axes"])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["point", *keys, "figure", "unit", "n", "mean", "ci95_half_width", "ci95_low", "ci95_high"])
    for point in summary["points"]:
        for key, entry in point["figures"].items():
            writer.writerow([point["label"], *(point["parameters"][k] for k in keys), key, entry["unit"],
                             entry["n"], entry["mean"], *("" if entry[f] is None else entry[f] for f in
                                                          ("ci95_half_width", "ci95_low", "ci95_high"))])
    points = {p["label"]: p for p in summary["points"]}
    for diff in summary.get("differences", []):
        parameters = points[diff["point"]]["parameters"]
        for key, entry in diff["figures"].items():
            writer.writerow([f"{diff['point']} − {diff['baseline']}", *(parameters[k] for k in keys), key,
                             entry["unit"], entry["n"], entry["mean"], entry["ci95_half_width"], entry["ci95_low"],
                             entry["ci95_high"]])
    return out.getvalue()
