"""Prometheus text exposition, written by hand (a few dozen lines beat a dependency).

Engine figures (decisions, conflicts, NoValidHost by reason) are read from the engine's own counters at scrape
time; only what the engine cannot know (HTTP statuses, decision latency as the caller sees it) is counted here.
With ``--workers N`` each process exports its own figures, labelled with its pid.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import Counter
from typing import TYPE_CHECKING

from gantt import __version__

if TYPE_CHECKING:
    from gantt.replica import Replica

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        with self._lock:
            self.counts[i] += 1
            self.sum += value
            self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        cumulative = 0
        with self._lock:
            counts, total, count = list(self.counts), self.sum, self.count
        for bound, n in zip(self.buckets, counts, strict=False):
            cumulative += n
            out.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {cumulative}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {count}')
        out.append(f"{name}_sum{{{labels}}} {total:.6f}")
        out.append(f"{name}_count{{{labels}}} {count}")
        return out


class Metrics:
    def __init__(self) -> None:
        self.responses: Counter[tuple[str, int]] = Counter()  # (route, status)
        self.unhandled = 0  # answers of the catch-all handler: a bug, never bad input
        self.decision_latency = Histogram()
        self.pid = os.getpid()

    def render(self, replica: Replica) -> str:
        worker = f'worker="{self.pid}"'
        c = replica.counters()
        n, up, disabled = c["hosts"], c["hosts_up"], c.get("hosts_disabled", 0)
        decisions, placements, allocations = c["decisions"], c["placements"], c["allocations"]
        claim_conflicts, commit_conflicts, expired_claims = c["claim_conflicts"], c["commit_conflicts"], \
            c["expired_claims"]
        lines = [
            "# HELP gantt_decisions_total select_destinations requests decided (including ones that failed).",
            "# TYPE gantt_decisions_total counter",
            f"gantt_decisions_total{{{worker}}} {decisions}",
            "# HELP gantt_placements_total Instances claimed.",
            "# TYPE gantt_placements_total counter",
            f"gantt_placements_total{{{worker}}} {placements}",
            "# HELP gantt_claim_conflicts_total Claims that lost a race (local compare-and-set or store commit).",
            "# TYPE gantt_claim_conflicts_total counter",
            f'gantt_claim_conflicts_total{{{worker},level="local"}} {claim_conflicts}',
            f'gantt_claim_conflicts_total{{{worker},level="store"}} {commit_conflicts}',
            "# HELP gantt_no_valid_host_total NoValidHost answers by the filter that removed the last candidates.",
            "# TYPE gantt_no_valid_host_total counter",
        ]
        for reason, count in sorted(c["no_valid_host"].items()):
            lines.append(f'gantt_no_valid_host_total{{{worker},reason="{_escape(reason)}"}} {count}')
        lines += [
            "# HELP gantt_decision_seconds select_destinations latency inside the service.",
            "# TYPE gantt_decision_seconds histogram",
            *self.decision_latency.lines("gantt_decision_seconds", worker),
            "# HELP gantt_hosts Compute nodes in the replica: up (reporting, enabled), disabled (reporting),"
            " down (no report within service_down_time).",
            "# TYPE gantt_hosts gauge",
            f'gantt_hosts{{{worker},state="up"}} {up - disabled}',
            f'gantt_hosts{{{worker},state="disabled"}} {disabled}',
            f'gantt_hosts{{{worker},state="down"}} {n - up}',
            "# HELP gantt_build_info The running Gantt's version (always 1).",
            "# TYPE gantt_build_info gauge",
            f'gantt_build_info{{{worker},version="{_escape(__version__)}"}} 1',
            "# HELP gantt_allocations Allocations held.",
            "# TYPE gantt_allocations gauge",
            f"gantt_allocations{{{worker}}} {allocations}",
            "# HELP gantt_replica_revision Store revision the replica has applied.",
            "# TYPE gantt_replica_revision gauge",
            f"gantt_replica_revision{{{worker}}} {replica.revision}",
            "# HELP gantt_replica_lag_seconds Seconds since the replica last read the change feed.",
            "# TYPE gantt_replica_lag_seconds gauge",
            f"gantt_replica_lag_seconds{{{worker}}} {max(0.0, replica.clock() - replica.last_sync):.3f}",
            "# HELP gantt_replica_feed_errors_total Change feed reads that failed (retried).",
            "# TYPE gantt_replica_feed_errors_total counter",
            f"gantt_replica_feed_errors_total{{{worker}}} {replica.feed_errors}",
            "# HELP gantt_stale_reports_total Host reports ignored because a newer one had been applied.",
            "# TYPE gantt_stale_reports_total counter",
            f"gantt_stale_reports_total{{{worker}}} {replica.stale_reports}",
            "# HELP gantt_replica_resyncs_total Re-snapshots after the feed was compacted.",
            "# TYPE gantt_replica_resyncs_total counter",
            f"gantt_replica_resyncs_total{{{worker}}} {replica.resyncs}",
            "# HELP gantt_expired_claims_total Allocations released because the host never confirmed them.",
            "# TYPE gantt_expired_claims_total counter",
            f"gantt_expired_claims_total{{{worker}}} {expired_claims}",
            "# HELP gantt_store_write_failures_total Commits the store could not write (disk full, I/O error, no "
            "quorum); /health shows the last one.",
            "# TYPE gantt_store_write_failures_total counter",
            f"gantt_store_write_failures_total{{{worker}}} {c.get('store_write_failures', 0)}",
            "# HELP gantt_http_responses_total HTTP answers by route and status.",
            "# TYPE gantt_http_responses_total counter",
        ]
        for (route, status), count in sorted(self.responses.items()):
            lines.append(f'gantt_http_responses_total{{{worker},route="{_escape(route)}",status="{status}"}} '
                         f"{count}")
        lines += [
            "# HELP gantt_http_unhandled_total Requests answered by the catch-all handler (a bug).",
            "# TYPE gantt_http_unhandled_total counter",
            f"gantt_http_unhandled_total{{{worker}}} {self.unhandled}",
        ]
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
