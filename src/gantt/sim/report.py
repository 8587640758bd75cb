"""Showing results: a rich summary table (one column per run) and PNG plots (matplotlib, Agg backend)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

FAILURE_COLORS = {"rack_lost": "tab:red", "host_flap": "tab:orange", "scheduler_crash": "tab:purple"}


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


CLASS_LABELS = {"VCPU": "vCPU", "MEMORY_MB": "RAM", "DISK_GB": "disk"}


def class_label(rc: str) -> str:
    return CLASS_LABELS.get(rc, rc)


def _by_reason(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in counts.items()) or "none"


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    inv = r["invariants"]
    wall = r["wall_clock"]
    failed = r["failed_instances"]
    final = r["final"]
    rows = [
        ("policy", r["policy"]),
        ("hosts / schedulers", f"{r['hosts']:,} / {r['schedulers']}"),
        ("seed / decision time", f"{r['seed']} / " + (
            "measured (runs differ)" if r["decision_time"] == "measured" else f"{r['decision_time']:g} s")),
        ("virtual time", f"{r['virtual_seconds']:.1f} s"),
        ("requests (placed / failed / partial)",
         f"{r['requests']['total']:,} ({r['requests']['placed']:,} / {r['requests']['failed']:,} / "
         f"{r['requests']['partial']:,})"),
        ("instances placed / failed",
         f"{r['instances']['placed']:,} / {r['instances']['failed']:,} of {r['instances']['requested']:,}"),
        ("decision latency p50 / p99 (virtual)",
         f"{r['decision_latency']['p50_ms']:.2f} / {r['decision_latency']['p99_ms']:.2f} ms"),
        ("time to active p50 / p99 (virtual)",
         f"{r['time_to_active']['p50_ms'] / 1000:.2f} / {r['time_to_active']['p99_ms'] / 1000:.2f} s"),
        ("claim conflicts (CAS)", f"{r['conflicts']['claim_conflicts']:,}"),
        ("build rejections (compute check)", f"{r['conflicts']['build_rejections']:,}"),
        ("retries (alternates tried)", f"{r['retries']:,}"),
        ("builds failed on dead hosts", f"{r['build_failures_dead_host']:,}"),
        (f"failed {failed['unit']} by reason", _by_reason(failed["by_reason"])),
        (f"NoValidHost {failed['unit']} by filter", _by_reason(failed["no_valid_host_by_filter"])),
    ]
    for rc, zones in final["utilization"].items():
        rows.append((f"final {class_label(rc)} utilization",
                     ", ".join(f"{z} {_pct(u)}" for z, u in zones.items())))
    stranded = final["stranded"]
    rows += [
        ("stranded " + " / ".join(class_label(rc) for rc in stranded), " / ".join(_pct(v) for v in
                                                                                  stranded.values())),
        (f"fragmentation ({final['fragmentation_flavor']})", _pct(final["fragmentation"])),
        *((f"NUMA: {name} fits / has room by counts (hosts)",
           f"{f['hosts_it_fits']:,} / {f['hosts_with_room']:,}; {f['stranded_hosts']:,} stranded with "
           f"{f['stranded_free_pcpus']:,.0f} free pCPUs") for name, f in final.get("numa_fragmentation", {}).items()),
        ("overcommitted nodes (must be 0)", str(inv["overcommitted_nodes"])),
        ("nodes with a CPU pinned twice / a PCI pool over count (must be 0)",
         f"{inv.get('numa_overbooked_nodes', 0)} / {inv.get('pci_overbooked_nodes', 0)}"),
        ("placed + failed = requested", "yes" if inv["conservation"] else "NO"),
        ("claims on lost hosts after detection (must be 0)", str(inv["claims_after_detection"])),
        ("builds on lost hosts (must be 0)", str(inv["builds_on_lost_hosts"])),
        ("server group violations", str(inv["server_group_violations"])),
        ("wall clock: run time (CPU time)", f"{wall['wall_seconds']:.1f} s ({wall['cpu_seconds']:.1f} s)"),
        ("wall clock: CPU outside the engine", f"{wall['simulator_overhead_cpu_seconds']:.1f} s"),
        ("wall clock: engine decisions/s (CPU time)", f"{wall['engine']['decisions_per_second']:,.0f}"),
        ("wall clock: engine p50 / p99", f"{wall['engine']['p50_ms']:.3f} / {wall['engine']['p99_ms']:.3f} ms"),
    ]
    rows += volume_rows(r)
    for f in r["failures"]:
        rows.append((f"failure @{f['at']:g}s {f['kind']} {f['target']}",
                     f"{f['hosts']} hosts, {f['instances_on_hosts']} instances, "
                     f"{f['build_failures']} failed builds, {f['claims_on_dead_hosts']} claims before detection"))
    return rows


def volume_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The volume namespace's figures (sim/volumes.py), when the scenario has volumes."""
    v = r.get("volumes")
    if v is None:
        return []
    inv = r["invariants"]
    n = v["volumes"]
    rows = [
        ("volumes: pools / backends", f"{v['pools']} / {v['backends']}"),
        ("volumes placed / failed of requested",
         f"{n['placed']:,} / {n['failed']:,} of {n['requested']:,} ({n['deleted_after_failed_build']:,} deleted "
         f"with their failed build)"),
        ("volumes failed by reason", _by_reason(v["failed_volumes"]["by_reason"])),
        ("volumes: NoValidPool by filter", _by_reason(v["failed_volumes"]["no_valid_pool_by_filter"])),
        ("volumes lost with their pool / VMs affected", f"{n['lost']:,} / {v['vms_affected_by_lost_pools']:,}"),
        ("volumes created on a lost pool before it was known", f"{v['placed_on_lost_pools']:,}"),
    ]
    for name, p in v["by_pool"].items():
        kind = "thin" if p["thin"] else "thick"
        rows.append((f"pool {name} ({kind}{', LOST' if p['lost'] else ''})",
                     f"allocated {_pct(p['allocated_fill'])} / provisioned {_pct(p['provisioned_fill'])} / "
                     f"physical {_pct(p['physical_fill'])} of {p['total_gb']:,.0f} GB; over-subscription "
                     f"{p['oversubscription'] or 0:.2f} (peak {p['peak_oversubscription']:.2f}, max "
                     f"{p['max_over_subscription_ratio']:g})"))
    rows += [
        ("volume pools over capacity (must be 0)", str(inv.get("volume_pools_over_capacity", 0))),
        ("volume claims on lost pools after detection (must be 0)",
         str(inv.get("volume_claims_on_lost_pools_after_detection", 0))),
    ]
    return rows


_NUMBER_RE = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")  # a figure, not the digit of a name (az1, p99)


def delta(a: str, b: str) -> str:
    """``b - a`` for two cells of one summary row that say the same thing in numbers ("0.52 / 0.91 ms" and
    "0.60 / 1.10 ms" give "+0.08 / +0.19 ms"), number by number, each to the finer of the two precisions; "" when
    the cells differ in their words (two policies, a failure only one run has) or carry no number."""
    shape_a, shape_b = _NUMBER_RE.sub("#", a), _NUMBER_RE.sub("#", b)
    numbers_a, numbers_b = _NUMBER_RE.findall(a), _NUMBER_RE.findall(b)
    if shape_a != shape_b or not numbers_a:
        return ""
    parts = []
    for x, y in zip(numbers_a, numbers_b, strict=True):
        decimals = max(len(t.partition(".")[2]) for t in (x, y))
        d = float(y.replace(",", "")) - float(x.replace(",", ""))
        grouping = "," if "," in x + y else ""
        parts.append("0" if round(d, decimals) == 0 else f"{d:+{grouping}.{decimals}f}")
    pieces = shape_a.split("#")
    return "".join(piece + (parts[i] if i < len(parts) else "") for i, piece in enumerate(pieces))


def print_summary(results: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="Gantt simulation" + (" — comparison" if len(results) > 1 else ""))
    table.add_column("metric", style="bold")
    for r in results:
        table.add_column(f"{r['scenario']} ({r['policy']})", overflow="fold")
    pair = len(results) == 2
    if pair:
        table.add_column("Δ (B − A)", overflow="fold")
    per_run = [summary_rows(r) for r in results]
    labels = [label for label, _ in per_run[0]]
    for i, label in enumerate(labels):
        values = [rows[i][1] if i < len(rows) and rows[i][0] == label else dict(rows).get(label, "")
                  for rows in per_run]
        table.add_row(label, *values, *([delta(values[0], values[1]) if values[1] else ""] if pair else []))
    # Failures differ between runs; list the ones only a later run has.
    for rows in per_run[1:]:
        for label, value in rows:
            if label not in labels:
                table.add_row(label, *["" if rows is not other else value for other in per_run],
                              *([""] if pair else []))
    console.print(table)


LABEL_LEVELS = (1.0, 0.66, 0.33)  # heights (axes fraction) an event's label may stand at


def label_levels(times: list[float], span: float, gap: float = 0.04) -> list[float]:
    """A height for each event label (in ``times`` order) so that labels closer than ``gap`` of the x span do not
    stand on each other: each takes the highest level whose last label is far enough to its left, the lowest
    level in turn when none is (a burst of more events than levels)."""
    last: list[float | None] = [None] * len(LABEL_LEVELS)
    heights = [0.0] * len(times)
    width = gap * span if span > 0 else 0.0
    for n, i in enumerate(sorted(range(len(times)), key=lambda k: times[k])):
        free = [j for j, x in enumerate(last) if x is None or times[i] - x >= width]
        level = free[0] if free else n % len(LABEL_LEVELS)
        last[level] = times[i]
        heights[i] = LABEL_LEVELS[level]
    return heights


def _label_events(ax: Any, events: list[tuple[float, str, str]], span: float) -> None:
    """``(time, text, color)`` labels at the top of ``ax``, staggered where they would overlap."""
    for (at, text, color), height in zip(events, label_levels([e[0] for e in events], span), strict=True):
        ax.annotate(text, xy=(at, height), xycoords=("data", "axes fraction"), fontsize=7, color=color,
                    rotation=90, va="top", ha="right")


def _mark_failures(ax: Any, r: dict[str, Any], *, label: bool) -> None:
    for f in r["failures"]:
        color = FAILURE_COLORS.get(f["kind"], "gray")
        ax.axvline(f["at"], color=color, linestyle="--", linewidth=1)
        if f.get("until") is not None:  # how long the failure lasts (flapping cycles, scheduler downtime)
            end = min(f["until"], r["timeline"]["t"][-1]) if r["timeline"]["t"] else f["until"]
            ax.axvspan(f["at"], max(end, f["at"]), color=color, alpha=0.08)
    if label:
        t = r["timeline"]["t"]
        _label_events(ax, [(f["at"], f"{f['kind']}\n{f['target']}", FAILURE_COLORS.get(f["kind"], "gray"))
                           for f in r["failures"]], (t[-1] - t[0]) if t else 0.0)


def _per_interval(series: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *series[:-1]], series, strict=True)]


def slug(text: str) -> str:
    """A file-name-safe form of a scenario name or sweep point (``hosts=1000 filters.x=3`` stays readable)."""
    return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "scenario"


def plot_stem(results: list[dict[str, Any]], point: str | None = None) -> str:
    names = [r["scenario"] for r in results]
    if len(set(names)) < len(names):  # a comparison of one scenario under two policies
        names = [f"{r['scenario']}-{r['policy']}" for r in results]
    stem = "-vs-".join(slug(name) for name in names)
    return f"{stem}-{slug(point)}" if point else stem


def _interval(timeline: dict[str, Any]) -> str:
    t = timeline["t"]
    return f"{t[1] - t[0]:g} s" if len(t) > 1 else "sample"


PLOTS_MISSING = ("the simulator's plots need matplotlib, which is an extra of Gantt's: "
                 "pip install 'gantt[sim]' (or pip install matplotlib)")


class PlotsUnavailable(ImportError):
    """matplotlib is not installed: the plots are the ``sim`` extra's (``pip install 'gantt[sim]'``)."""


def require_plots() -> None:
    """PlotsUnavailable, saying what to install, unless matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotsUnavailable(PLOTS_MISSING) from None


def _new_figure(width: float, height: float) -> Any:
    # A bare Figure, not pyplot: nothing global to close, and tests can read its texts. The constrained layout
    # makes room for every title, label, tick label and legend (tight_layout ignores the figure's title).
    require_plots()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # PNG output, and a renderer to lay the texts out with
    return fig


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


_STYLES = ["-", "--", ":", "-."]


def timeline_figures(results: list[dict[str, Any]], point: str | None = None) -> dict[str, Any]:
    """The timeline plots as matplotlib Figures, by kind: utilization, retries, capacity (failures marked)."""
    names = [f"{r['scenario']} ({r['policy']})" for r in results]
    where = " vs ".join(names) + (f" — {point}" if point else "")
    figures = {"utilization": _utilization_figure(results, names, where),
               "retries": _retries_figure(results, names, where),
               "capacity": _capacity_figure(results, names, where)}
    with_volumes = [(r, name) for r, name in zip(results, names, strict=True) if "volumes" in r]
    if with_volumes:
        figures["volumes"] = volume_figure(with_volumes, where)
    return figures


def _utilization_figure(results: list[dict[str, Any]], names: list[str], where: str) -> Any:
    """Utilization per zone, one row per resource class, one column per run."""
    classes: list[str] = []
    for r in results:
        classes.extend(rc for rc in r["timeline"]["utilization"] if rc not in classes)
    fig = _new_figure(7 * len(results) + 4, 3.2 * len(classes) + 1)
    axes = fig.subplots(len(classes), len(results), squeeze=False, sharex=True)
    for col, (r, name) in enumerate(zip(results, names, strict=True)):
        tl = r["timeline"]
        for row, rc in enumerate(classes):
            ax = axes[row, col]
            for zone, values in tl["utilization"].get(rc, {}).items():
                ax.plot(tl["t"], [100 * v for v in values], label=zone)
            ax.set_title(f"{class_label(rc)} ({rc}) — {name}", fontsize=9)
            ax.set_ylabel(f"{class_label(rc)} used (% of up hosts)")
            ax.set_ylim(0, 105)
            _legend(ax)
            _mark_failures(ax, r, label=(row == 0))
        axes[-1, col].set_xlabel("virtual time (s)")
    fig.suptitle(f"Utilization per zone and resource class: {where}")
    return fig


def _retries_figure(results: list[dict[str, Any]], names: list[str], where: str) -> Any:
    """Retries, conflicts, failures per sample interval (the runs overlaid)."""
    fig = _new_figure(11, 10)
    axes = fig.subplots(3, 1, sharex=True)
    for i, (r, name) in enumerate(zip(results, names, strict=True)):
        tl = r["timeline"]
        style = _STYLES[i % len(_STYLES)]
        axes[0].plot(tl["t"], _per_interval(tl["retries"]), style, label=f"{name} retries")
        axes[0].plot(tl["t"], _per_interval(tl["conflicts"]), style, alpha=0.6, label=f"{name} conflicts")
        axes[1].plot(tl["t"], _per_interval(tl["failed"]), style, label=f"{name} failed, all reasons")
        axes[1].plot(tl["t"], _per_interval(tl["no_valid_host"]), style, alpha=0.6,
                     label=f"{name} failed, NoValidHost")
        axes[2].plot(tl["t"], _per_interval(tl["placed"]), style, label=f"{name} placed")
        axes[2].plot(tl["t"], tl["queued"], style, alpha=0.6, label=f"{name} requests queued at schedulers")
        for ax in axes:
            _mark_failures(ax, r, label=(ax is axes[0] and i == 0))
    every = _interval(results[0]["timeline"])
    axes[0].set_title("Retries to alternates and claim conflicts", fontsize=9)
    axes[0].set_ylabel(f"count per {every}")
    axes[1].set_title("Failed instances", fontsize=9)
    axes[1].set_ylabel(f"instances per {every}")
    axes[2].set_title("Placed instances and the schedulers' queue", fontsize=9)
    axes[2].set_ylabel(f"instances per {every} / requests")
    axes[2].set_xlabel("virtual time (s)")
    for ax in axes:
        _legend(ax)
    fig.suptitle(f"Retries, conflicts and failures over time: {where}")
    return fig


def _capacity_figure(results: list[dict[str, Any]], names: list[str], where: str) -> Any:
    """Capacity and fragmentation: hosts up (real vs what the truth believes), stranded share."""
    fig = _new_figure(11, 7)
    axes = fig.subplots(2, 1, sharex=True)
    for i, (r, name) in enumerate(zip(results, names, strict=True)):
        tl = r["timeline"]
        style = _STYLES[i % len(_STYLES)]
        axes[0].plot(tl["t"], tl["hosts_up"], style, label=f"{name} hosts really up")
        axes[0].plot(tl["t"], tl["hosts_seen_up"], style, alpha=0.6, label=f"{name} hosts the truth sees up")
        for rc, values in tl["stranded"].items():
            axes[1].plot(tl["t"], [100 * v for v in values], style, label=f"{name} stranded {class_label(rc)}")
        axes[1].plot(tl["t"], [100 * v for v in tl["fragmentation"]], style, alpha=0.6,
                     label=f"{name} fragmentation ({r['final']['fragmentation_flavor']}, of free vCPU)")
        for ax in axes:
            _mark_failures(ax, r, label=(ax is axes[0] and i == 0))
    axes[0].set_title("Hosts up", fontsize=9)
    axes[0].set_ylabel("hosts")
    axes[1].set_title("Stranded capacity and fragmentation", fontsize=9)
    axes[1].set_ylabel("% of free capacity")
    axes[1].set_xlabel("virtual time (s)")
    for ax in axes:
        _legend(ax)
    fig.suptitle(f"Capacity and fragmentation: {where}")
    return fig


def volume_figure(runs: list[tuple[dict[str, Any], str]], where: str) -> Any:
    """Per pool, over time: over-subscription (provisioned ÷ capacity less reserve) and physical fill, pool
    events marked (a lost pool's line ends)."""
    fig = _new_figure(7 * len(runs) + 4, 7)
    axes = fig.subplots(2, len(runs), squeeze=False, sharex=True)
    for col, (r, name) in enumerate(runs):
        v = r["volumes"]
        tl = v["timeline"]
        for key, values in tl["oversubscription"].items():
            limit = v["by_pool"][key]["max_over_subscription_ratio"]
            axes[0, col].plot(tl["t"], [float("nan") if x is None else x for x in values],
                              label=f"{key} (max {limit:g})")
        for key, values in tl["physical_fill"].items():
            axes[1, col].plot(tl["t"], [float("nan") if x is None else 100 * x for x in values], label=key)
        axes[0, col].set_title(f"Pools' over-subscription — {name}", fontsize=9)
        axes[0, col].set_ylabel("provisioned ÷ (capacity − reserve)")
        axes[1, col].set_title(f"Pools' physical fill — {name}", fontsize=9)
        axes[1, col].set_ylabel("% of physical capacity")
        axes[1, col].set_xlabel("virtual time (s)")
        events = [(e["at"], f"{e['kind']}\n{e['target']}", "tab:red" if e["kind"] != "pool_filled" else "tab:orange")
                  for e in v["events"]]
        for ax in axes[:, col]:
            for at, _, color in events:
                ax.axvline(at, color=color, linestyle="--", linewidth=1)
            _legend(ax)
        span = (tl["t"][-1] - tl["t"][0]) if tl["t"] else 0.0
        _label_events(axes[0, col], events, span)
    fig.suptitle(f"Volume pools: {where}")
    return fig


def run_title(summary: dict[str, Any]) -> str:
    """``small (gantt)``, or the scenario's name alone when a sweep varies the policy."""
    policy = summary["policy"]
    return str(summary["scenario"]) + (f" ({policy})" if isinstance(policy, str) else "")


def sweep_figure(summary: dict[str, Any]) -> Any:
    """Each headline figure against the sweep's points: the mean, with its 95 % interval as an error bar."""
    points = summary["points"]
    keys = list(points[0]["figures"])
    cols = 3
    rows = -(-len(keys) // cols)
    fig = _new_figure(5.2 * cols, 3.4 * rows + 1)
    axes = fig.subplots(rows, cols, squeeze=False)
    x = list(range(len(points)))
    labels = [p["label"] for p in points]
    # A line between points says that values between them exist: only along one numeric axis. Policies, flags or
    # a grid of several axes are categories, shown as points alone.
    axes_values = list(summary["sweep"]["axes"].values())
    ordered = len(axes_values) == 1 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                            for v in axes_values[0])
    for ax, key in zip(axes.flat, keys, strict=False):
        entries = [p["figures"][key] for p in points]
        means = [e["mean"] for e in entries]
        # the interval as it stands, cut to the figure's range: asymmetric where it was cut
        below = [e["mean"] - e["ci95_low"] if e["ci95_low"] is not None else 0.0 for e in entries]
        above = [e["ci95_high"] - e["mean"] if e["ci95_high"] is not None else 0.0 for e in entries]
        ax.errorbar(x, means, yerr=[below, above], fmt="o-" if ordered else "o", capsize=4)
        ax.set_title(entries[0]["label"], fontsize=9)
        ax.set_ylabel(entries[0]["unit"])
        ax.set_xticks(x, labels, rotation=30 if len(points) > 1 else 0, ha="right" if len(points) > 1 else "center",
                      fontsize=7)
        ax.set_xlabel("sweep point")
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    sweep = summary["sweep"]
    seeds = sweep["seeds"]
    over = f"{len(seeds)} seeds ({seeds[0]}–{seeds[-1]})" if len(seeds) > 1 else f"seed {seeds[0]}, no interval"
    fig.suptitle(f"{run_title(summary)}: mean and 95 % CI (Student t) over {over}")
    return fig


def save_figure(fig: Any, path: Path) -> str:
    fig.savefig(path, dpi=110)
    return str(path)


def write_plots(results: list[dict[str, Any]], directory: str | Path, point: str | None = None) -> list[str]:
    """Utilization, retries/conflicts/failures and capacity over time, failures marked. Files are named after the
    scenario(s) (and the sweep point): ``small-utilization.png``. Returns the paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    stem = plot_stem(results, point)
    return [save_figure(fig, out / f"{stem}-{kind}.png") for kind, fig in timeline_figures(results, point).items()]


def write_sweep_plots(summary: dict[str, Any], first_runs: list[dict[str, Any]], directory: str | Path) -> list[str]:
    """The sweep's summary plot, and the timelines of each point's first seed."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    axes = "+".join(slug(k) for k in summary["sweep"]["axes"]) or "seeds"
    paths = [save_figure(sweep_figure(summary), out / f"{slug(summary['scenario'])}-sweep-{axes}.png")]
    seed = summary["sweep"]["seeds"][0]
    for point, r in zip(summary["points"], first_runs, strict=True):
        label = f"{point['label']} seed={seed}" if point["parameters"] else f"seed={seed}"
        paths += write_plots([r], out, point=label)
    return paths
