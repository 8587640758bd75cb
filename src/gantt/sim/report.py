"""Showing results: a rich summary table (one column per run) and PNG plots (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

FAILURE_COLORS = {"rack_lost": "tab:red", "host_flap": "tab:orange", "scheduler_crash": "tab:purple"}


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    inv = r["invariants"]
    nvh = ", ".join(f"{k}: {v}" for k, v in r["no_valid_host"].items()) or "none"
    rows = [
        ("policy", r["policy"]),
        ("hosts / schedulers", f"{r['hosts']:,} / {r['schedulers']}"),
        ("wall time (CPU time)", f"{r['wall_seconds']:.1f} s ({r.get('cpu_seconds', 0.0):.1f} s)"),
        ("CPU outside the engine", f"{r.get('simulator_overhead_cpu_seconds', 0.0):.1f} s"),
        ("virtual time", f"{r['virtual_seconds']:.1f} s"),
        ("requests (placed / failed / partial)",
         f"{r['requests']['total']:,} ({r['requests']['placed']:,} / {r['requests']['failed']:,} / "
         f"{r['requests']['partial']:,})"),
        ("instances placed / failed",
         f"{r['instances']['placed']:,} / {r['instances']['failed']:,} of {r['instances']['requested']:,}"),
        ("engine decisions/s (engine CPU time)", f"{r['engine']['decisions_per_second']:,.0f}"),
        ("engine p50 / p99", f"{r['engine']['p50_ms']:.3f} / {r['engine']['p99_ms']:.3f} ms"),
        ("decision latency p50 / p99 (virtual)",
         f"{r['decision_latency']['p50_ms']:.2f} / {r['decision_latency']['p99_ms']:.2f} ms"),
        ("time to active p50 / p99 (virtual)",
         f"{r['time_to_active']['p50_ms'] / 1000:.2f} / {r['time_to_active']['p99_ms'] / 1000:.2f} s"),
        ("claim conflicts (CAS)", f"{r['conflicts']['claim_conflicts']:,}"),
        ("build rejections (compute check)", f"{r['conflicts']['build_rejections']:,}"),
        ("retries (alternates tried)", f"{r['retries']:,}"),
        ("builds failed on dead hosts", f"{r['build_failures_dead_host']:,}"),
        ("NoValidHost by reason", nvh),
        ("failed by reason", ", ".join(f"{k}: {v}" for k, v in r["failure_reasons"].items()) or "none"),
        ("final vCPU utilization", ", ".join(f"{z} {_pct(u)}" for z, u in r["final"]["utilization_vcpu"].items())),
        ("final RAM utilization", ", ".join(f"{z} {_pct(u)}" for z, u in r["final"]["utilization_ram"].items())),
        ("stranded vCPU / RAM / disk", f"{_pct(r['final']['stranded_vcpu'])} / {_pct(r['final']['stranded_ram'])}"
                                       f" / {_pct(r['final'].get('stranded_disk', 0.0))}"),
        (f"fragmentation ({r['final']['fragmentation_flavor']})", _pct(r["final"]["fragmentation"])),
        ("overcommitted nodes (must be 0)", str(inv["overcommitted_nodes"])),
        ("placed + failed = requested", "yes" if inv["conservation"] else "NO"),
        ("claims on lost hosts after detection (must be 0)", str(inv["claims_after_detection"])),
        ("builds on lost hosts (must be 0)", str(inv["builds_on_lost_hosts"])),
        ("server group violations", str(inv["server_group_violations"])),
    ]
    for f in r["failures"]:
        rows.append((f"failure @{f['at']:g}s {f['kind']} {f['target']}",
                     f"{f['hosts']} hosts, {f['instances_on_hosts']} instances, "
                     f"{f['build_failures']} failed builds, {f['claims_on_dead_hosts']} claims before detection"))
    return rows


def print_summary(results: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="Gantt simulation" + (" — comparison" if len(results) > 1 else ""))
    table.add_column("metric", style="bold")
    for r in results:
        table.add_column(f"{r['scenario']} ({r['policy']})", overflow="fold")
    per_run = [summary_rows(r) for r in results]
    labels = [label for label, _ in per_run[0]]
    for i, label in enumerate(labels):
        values = [rows[i][1] if i < len(rows) and rows[i][0] == label else dict(rows).get(label, "")
                  for rows in per_run]
        table.add_row(label, *values)
    # Failures differ between runs; list the ones only a later run has.
    for rows in per_run[1:]:
        for label, value in rows:
            if label not in labels:
                table.add_row(label, *["" if rows is not other else value for other in per_run])
    console.print(table)


def _mark_failures(ax: Any, r: dict[str, Any], *, label: bool) -> None:
    for f in r["failures"]:
        color = FAILURE_COLORS.get(f["kind"], "gray")
        ax.axvline(f["at"], color=color, linestyle="--", linewidth=1)
        if f.get("until") is not None:  # how long the failure lasts (flapping cycles, scheduler downtime)
            end = min(f["until"], r["timeline"]["t"][-1]) if r["timeline"]["t"] else f["until"]
            ax.axvspan(f["at"], max(end, f["at"]), color=color, alpha=0.08)
        if label:
            ax.annotate(f"{f['kind']}\n{f['target']}", xy=(f["at"], 1.0), xycoords=("data", "axes fraction"),
                        fontsize=7, color=color, rotation=90, va="top", ha="right")


def _per_interval(series: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *series[:-1]], series, strict=True)]


def _save(fig: Any, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def write_plots(results: list[dict[str, Any]], directory: str | Path) -> list[str]:
    """Utilization, retries/conflicts/failures and capacity over time, failures marked. Returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[str] = []
    names = [f"{r['scenario']} ({r['policy']})" for r in results]
    styles = ["-", "--", ":", "-."]

    # 1. utilization per AZ
    fig, axes = plt.subplots(len(results), 1, figsize=(11, 4 * len(results)), squeeze=False, sharex=True)
    for ax, r, name in zip(axes[:, 0], results, names, strict=True):
        tl = r["timeline"]
        for zone, values in tl["util_vcpu"].items():
            ax.plot(tl["t"], [100 * v for v in values], label=f"{zone} vCPU")
        for zone, values in tl["util_ram"].items():
            ax.plot(tl["t"], [100 * v for v in values], linestyle=":", label=f"{zone} RAM")
        ax.set_ylabel("utilization of up hosts (%)")
        ax.set_title(name)
        ax.set_ylim(0, 105)
        ax.legend(fontsize=7, ncol=4, loc="lower right")
        _mark_failures(ax, r, label=True)
    axes[-1, 0].set_xlabel("virtual time (s)")
    paths.append(_save(fig, out / "utilization.png"))

    # 2. retries, conflicts, failures per sample interval (the runs overlaid)
    fig, axes = plt.subplots(3, 1, figsize=(11, 10), sharex=True)
    for i, (r, name) in enumerate(zip(results, names, strict=True)):
        tl = r["timeline"]
        style = styles[i % len(styles)]
        axes[0].plot(tl["t"], _per_interval(tl["retries"]), style, label=f"{name} retries")
        axes[0].plot(tl["t"], _per_interval(tl["conflicts"]), style, alpha=0.6, label=f"{name} conflicts")
        axes[1].plot(tl["t"], _per_interval(tl["failed"]), style, label=f"{name} failed instances")
        axes[1].plot(tl["t"], _per_interval(tl["no_valid_host"]), style, alpha=0.6, label=f"{name} NoValidHost")
        axes[2].plot(tl["t"], _per_interval(tl["placed"]), style, label=f"{name} placed")
        axes[2].plot(tl["t"], tl["queued"], style, alpha=0.6, label=f"{name} queued at schedulers")
        for ax in axes:
            _mark_failures(ax, r, label=(ax is axes[0] and i == 0))
    axes[0].set_ylabel("per interval")
    axes[1].set_ylabel("per interval")
    axes[2].set_ylabel("per interval / queue")
    axes[2].set_xlabel("virtual time (s)")
    for ax in axes:
        ax.legend(fontsize=7)
    paths.append(_save(fig, out / "retries.png"))

    # 3. capacity and fragmentation: hosts up (real vs what the truth believes), stranded share
    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for i, (r, name) in enumerate(zip(results, names, strict=True)):
        tl = r["timeline"]
        style = styles[i % len(styles)]
        axes[0].plot(tl["t"], tl["hosts_up"], style, label=f"{name} hosts really up")
        axes[0].plot(tl["t"], tl["hosts_seen_up"], style, alpha=0.6, label=f"{name} hosts the truth sees up")
        axes[1].plot(tl["t"], [100 * v for v in tl["stranded_vcpu"]], style, label=f"{name} stranded vCPU")
        axes[1].plot(tl["t"], [100 * v for v in tl["fragmentation"]], style, alpha=0.6,
                     label=f"{name} fragmentation ({r['final']['fragmentation_flavor']})")
        for ax in axes:
            _mark_failures(ax, r, label=(ax is axes[0] and i == 0))
    axes[0].set_ylabel("hosts")
    axes[1].set_ylabel("% of free capacity")
    axes[1].set_xlabel("virtual time (s)")
    for ax in axes:
        ax.legend(fontsize=7)
    paths.append(_save(fig, out / "capacity.png"))
    return paths
