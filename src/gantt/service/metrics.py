"""Prometheus text exposition, written by hand.

Not prometheus_client's multiprocess mode: measured on the hot path (an answer counted and timed, a decision
counted and timed: two counters and two histograms per placement), its mmap-backed values cost about 8 times
what these locked dicts do (124-216 µs against 14-32 µs per request on this 2-vCPU machine under a load average
of 8-12; a few µs more per request quiet), a few percent of a placement's 0.48 ms of server CPU and more of a host
report's 0.17 ms, for the same figures.

Engine figures (placements, conflicts, NoValidHost by reason) are read from the engine's own counters, and the
cloud's state (nodes by state, capacity and usage per zone) from the replica, at scrape time. What the engine
cannot know is counted here: HTTP answers and decisions as the caller sees them, each counter beside its
histogram and under one lock, so that a counter and its histogram's ``_count`` are always equal.

Every series of a worker's own figures carries ``worker``: the worker's index under ``gantt serve --workers N``
(0 to N-1, kept when a worker is restarted; 0 for a single process), so series survive restarts.
``gantt_worker_info`` maps it to the pid. Whichever worker takes a scrape answers for all of them (``Shared``): a
scraper sees every worker's series every time, not one worker's at random. The cloud's state (``CLOUD_WIDE``:
nodes by state, capacity, usage, allocations held) is the store's, the same whichever replica reads it: it is
given once, without ``worker``, as the answering worker's replica sees it, so ``sum()`` counts it once.

Amounts are in base units, the unit in the family's name: memory and disk in bytes (``gantt_capacity_bytes``),
bandwidth in bits per second, packet rates in packets per second; the other resource classes are counted
(``gantt_capacity``: VCPU, PCPU, VGPU, SRIOV_NET_VF, CUSTOM_*, ...). Values are printed exactly, never rounded
to 6 significant digits.
"""

from __future__ import annotations

import bisect
import logging
import os
import platform
import resource
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gantt.base.version import __version__
from gantt.model import GanttError, NoValidHost

if TYPE_CHECKING:
    from gantt.replication.replica import Replica

log = logging.getLogger(__name__)

# Resource classes with a unit: (the families' unit suffix, base units per one of the class's).
UNITS: dict[str, tuple[str, int]] = {
    "MEMORY_MB": ("bytes", 1 << 20),
    "DISK_GB": ("bytes", 1 << 30),
    "NET_BW_EGR_KILOBIT_PER_SEC": ("bits_per_second", 1000),
    "NET_BW_IGR_KILOBIT_PER_SEC": ("bits_per_second", 1000),
    "NET_PACKET_RATE_KILOPACKET_PER_SEC": ("packets_per_second", 1000),
    "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC": ("packets_per_second", 1000),
    "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC": ("packets_per_second", 1000),
}
_UNIT_SUFFIXES = ("", "_bytes", "_bits_per_second", "_packets_per_second")
# Families of the cloud's state, given once (no worker label) however many workers answer.
CLOUD_WIDE = frozenset({"gantt_hosts", "gantt_allocations", "gantt_namespace_hosts", "gantt_namespace_allocations",
                        *(f"gantt_{kind}{suffix}" for kind in ("capacity", "usage") for suffix in _UNIT_SUFFIXES)})


def number(value: float) -> str:
    """A sample's value exactly: an integral amount as an integer (27197440, not 2.71974e+07), another float
    with every digit it has (repr: the shortest text that reads back as the same float)."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 2 ** 63:
        return str(int(value))
    return repr(value)

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Histogram:
    """Not locked itself: ``Metrics`` observes and reads it under the lock of the counter it goes with."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def copy(self) -> Histogram:
        other = Histogram(self.buckets)
        other.counts, other.sum, other.count = list(self.counts), self.sum, self.count
        return other

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        cumulative = 0
        for bound, n in zip(self.buckets, self.counts, strict=False):
            cumulative += n
            out.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {cumulative}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.sum:.6f}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


class Deciding:
    """``Metrics.deciding``'s ``with`` block: a class, not a generator's context manager, which cost ~4 us of
    every placement on the event loop (a generator, its frame and the wrapper's)."""

    __slots__ = ("metrics", "start")

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.start = 0.0

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
        if kind is None:
            outcome = "placed"
        elif isinstance(error, NoValidHost):
            outcome = "no_valid_host"
        elif isinstance(error, GanttError):
            outcome = "refused" if error.status < 500 else "error"
        else:
            outcome = "error"
        self.metrics.decided(outcome, time.perf_counter() - self.start)  # the error, if any, goes on


class Metrics:
    def __init__(self, worker: int = 0) -> None:
        self.worker = worker
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self.responses: Counter[tuple[str, int]] = Counter()  # (route, status)
        self.request_latency: dict[str, Histogram] = {}  # route -> its answers' latency
        self.decisions: Counter[str] = Counter()  # outcome
        self.decision_latency = Histogram()
        self.unhandled = 0  # answers of the catch-all handler: a bug, never bad input
        self.client_disconnects = 0  # requests whose client hung up before its body was read whole
        self.hot_lane = 0  # requests answered from the HTTP protocol's hot lane (service.hot.Lane)
        self.start_time = _start_time()
        self.extra: Callable[[Replica], list[str]] | None = None  # more series (per namespace: service.namespaces)

    def answered(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.responses[(route, status)] += 1
            histogram = self.request_latency.get(route)
            if histogram is None:
                histogram = self.request_latency[route] = Histogram()
            histogram.observe(seconds)

    def decided(self, outcome: str, seconds: float) -> None:
        with self._lock:
            self.decisions[outcome] += 1
            self.decision_latency.observe(seconds)

    def deciding(self) -> Deciding:
        """Time the decision made in the ``with`` block and count it by how it ended: placed, no_valid_host,
        refused (a 4xx) or error. The counter and the histogram move together, whatever the outcome: their totals
        always agree."""
        return Deciding(self)

    def render(self, replica: Replica) -> str:
        worker = f'worker="{self.worker}"'
        with self._lock:
            responses, decisions = dict(self.responses), dict(self.decisions)
            request_latency = {route: h.copy() for route, h in self.request_latency.items()}
            decision_latency = self.decision_latency.copy()
        c = replica.counters()
        state = replica.utilization()
        lines = [*_decision_lines(worker, decisions, decision_latency, c), *_cloud_lines(state, c),
                 *_replica_lines(replica, worker, c), *_http_lines(worker, responses, request_latency),
                 *self._own_lines(worker, replica)]
        return "\n".join(lines) + "\n"

    def _own_lines(self, worker: str, replica: Replica) -> list[str]:
        """This worker's counters past the routes', what process it is, and what others add (``extra``)."""
        return [
            *_head("gantt_http_unhandled_total", "counter", "Requests answered by the catch-all handler (a bug)."),
            f"gantt_http_unhandled_total{{{worker}}} {self.unhandled}",
            *_head("gantt_http_client_disconnects_total", "counter", "Requests whose client hung up (or was cut "
                   "off by the body deadline) before its body was read whole: no answer was sent."),
            f"gantt_http_client_disconnects_total{{{worker}}} {self.client_disconnects}",
            *_head("gantt_http_hot_lane_total", "counter", "Requests of the hot routes answered from the HTTP "
                   "protocol's own lane (the others went through the ASGI app: chunked, 100-continue, a query...)."),
            f"gantt_http_hot_lane_total{{{worker}}} {self.hot_lane}",
            *_head("gantt_build_info", "gauge", "The running Gantt's version and Python's (always 1)."),
            f'gantt_build_info{{{worker},version="{_escape(__version__)}",'
            f'python="{_escape(platform.python_version())}"}} 1',
            *_head("gantt_worker_info", "gauge", "The process serving as this worker (its pid changes when the "
                   "worker is restarted; the worker label does not)."),
            f'gantt_worker_info{{{worker},pid="{self.pid}"}} 1',
            *_process_lines(worker, self.start_time),
            *(self.extra(replica) if self.extra is not None else ()),
        ]


def _decision_lines(worker: str, decisions: dict[str, int], decision_latency: Histogram,
                    c: dict[str, Any]) -> list[str]:
    return [
        *_head("gantt_decisions_total", "counter", "select_destinations requests answered, by outcome (placed, "
               "no_valid_host, refused: another 4xx, error: 5xx); they sum to gantt_decision_seconds_count."),
        *(f'gantt_decisions_total{{{worker},outcome="{outcome}"}} {n}' for outcome, n in sorted(decisions.items())),
        *_head("gantt_decision_seconds", "histogram", "select_destinations latency inside the service, one "
               "observation per gantt_decisions_total."),
        *decision_latency.lines("gantt_decision_seconds", worker),
        *_head("gantt_engine_decisions_total", "counter", "Passes through the engine for select_destinations: "
               "above gantt_decisions_total by the requests decided again after a claim conflict."),
        f"gantt_engine_decisions_total{{{worker}}} {c['decisions']}",
        *_head("gantt_placements_total", "counter", "Instances claimed."),
        f"gantt_placements_total{{{worker}}} {c['placements']}",
        *_head("gantt_claim_conflicts_total", "counter",
               "Claims that lost a race (local compare-and-set or store commit)."),
        f'gantt_claim_conflicts_total{{{worker},level="local"}} {c["claim_conflicts"]}',
        f'gantt_claim_conflicts_total{{{worker},level="store"}} {c["commit_conflicts"]}',
        *_head("gantt_no_valid_host_total", "counter",
               "NoValidHost explanations by the filter that removed the last candidates (per engine pass)."),
        *(f'gantt_no_valid_host_total{{{worker},reason="{_escape(reason)}"}} {n}'
          for reason, n in sorted(c["no_valid_host"].items())),
    ]


def _cloud_lines(state: Any, c: dict[str, Any]) -> list[str]:
    """The cloud's figures (no worker label): nodes by state, amounts by zone, allocations."""
    return [
        *_head("gantt_hosts", "gauge", "Compute nodes in the replica, each in one state: down (no report "
               "within service_down_time, or forced down, whether or not disabled), else disabled (by an "
               "operator), else up. The cloud's figure: no worker label."),
        f'gantt_hosts{{state="up"}} {state.hosts_up}',
        f'gantt_hosts{{state="down"}} {state.hosts_down}',
        f'gantt_hosts{{state="disabled"}} {state.hosts_disabled}',
        *_amounts(state.zones),
        *_head("gantt_allocations", "gauge", "Allocations held (the cloud's figure: no worker label)."),
        f"gantt_allocations {c['allocations']}",
    ]


def _replica_lines(replica: Replica, worker: str, c: dict[str, Any]) -> list[str]:
    return [
        *_head("gantt_replica_revision", "gauge", "Store revision the replica has applied."),
        f"gantt_replica_revision{{{worker}}} {replica.revision}",
        *_behind(replica, worker, "gantt_replica_revisions_behind",
                 "Revisions the store holds that the replica has not applied yet (the store's head minus "
                 "gantt_replica_revision, read at the scrape): its real lag; 0 when current."),
        *_head("gantt_replica_seconds_since_feed_read", "gauge",
               "Seconds since the replica last read its change feed (it reads at least every 0.5 s: more "
               "says the feed is stuck; not a lag: an idle store has nothing to read)."),
        f"gantt_replica_seconds_since_feed_read{{{worker}}} {replica.lag:.3f}",
        *_head("gantt_replica_feed_errors_total", "counter", "Change feed reads that failed (retried)."),
        f"gantt_replica_feed_errors_total{{{worker}}} {replica.feed_errors}",
        *_head("gantt_stale_reports_total", "counter",
               "Host reports not written: their node was deleted after they were taken."),
        f"gantt_stale_reports_total{{{worker}}} {replica.stale_reports}",
        *_head("gantt_report_touches_total", "counter",
               "Host reports that changed nothing but their time: a liveness touch written, or nothing."),
        f"gantt_report_touches_total{{{worker}}} {replica.touches}",
        *_head("gantt_replica_resyncs_total", "counter", "Re-snapshots after the feed was compacted."),
        f"gantt_replica_resyncs_total{{{worker}}} {replica.resyncs}",
        *_head("gantt_expired_claims_total", "counter",
               "Allocations released because the host never confirmed them."),
        f"gantt_expired_claims_total{{{worker}}} {c['expired_claims']}",
        *_head("gantt_store_write_failures_total", "counter", "Commits the store could not write (disk full, "
               "I/O error, no quorum); /health shows the last one."),
        f"gantt_store_write_failures_total{{{worker}}} {c.get('store_write_failures', 0)}",
    ]


def _http_lines(worker: str, responses: dict[tuple[str, int], int],
                request_latency: dict[str, Histogram]) -> list[str]:
    lines = [
        *_head("gantt_http_responses_total", "counter", "HTTP answers by route and status; per route they sum "
               "to gantt_http_request_seconds_count."),
        *(f'gantt_http_responses_total{{{worker},route="{_escape(route)}",status="{status}"}} {n}'
          for (route, status), n in sorted(responses.items())),
        *_head("gantt_http_request_seconds", "histogram",
               "HTTP answers' latency by route, from the request's arrival to the end of the answer."),
    ]
    for route, histogram in sorted(request_latency.items()):
        lines += histogram.lines("gantt_http_request_seconds", f'{worker},route="{_escape(route)}"')
    return lines


# A worker's snapshot is rewritten this often for the others to serve; one older than SHARE_FRESH is a worker that
# no longer answers (stopped or hung): left out rather than served as if current.
SHARE_EVERY = 5.0
SHARE_FRESH = 30.0


class Shared:
    """Every worker's figures in every answer, through one snapshot file per worker in a directory the
    supervisor makes: a worker rewrites its own every ``SHARE_EVERY`` seconds and whenever it answers, then
    serves its fresh figures with the others' latest files.

    A worker writes what it serves before serving it, under one lock, so a file is never older than an answer
    its worker gave: a counter read through another worker never goes backwards (which a scraper would take for
    a restart).
    """

    def __init__(self, directory: str, metrics: Metrics) -> None:
        self.directory = directory
        self.metrics = metrics
        self.name = f"worker-{metrics.worker}.prom"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publish(self, replica: Replica) -> str:
        with self._lock:
            text = self.metrics.render(replica)
            path = os.path.join(self.directory, self.name)
            try:
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)  # readers see the old file or the new one, never half of one
            except OSError as exc:  # the others miss this worker for a while; its own answers carry on
                log.warning("could not share this worker's metrics in %s: %s", self.directory, exc)
        return text

    def answer(self, replica: Replica) -> str:
        own = self.publish(replica)
        others = []
        now = time.time()
        for name in sorted(os.listdir(self.directory)):
            if name == self.name or not name.endswith(".prom"):
                continue
            path = os.path.join(self.directory, name)
            try:
                if now - os.stat(path).st_mtime > SHARE_FRESH:
                    continue
                with open(path) as f:
                    others.append(f.read())
            except OSError:  # replaced or removed meanwhile
                continue
        return merge([own, *others])

    def start(self, replica: Replica) -> None:
        self.publish(replica)  # at once: a restarted worker's new pid is known before its first interval

        def run() -> None:
            while not self._stop.wait(SHARE_EVERY):
                try:
                    self.publish(replica)
                except Exception:  # a bug in rendering: /metrics shows it; this thread must not die of it
                    log.exception("could not render this worker's metrics for the others")

        self._thread = threading.Thread(target=run, name="gantt-metrics-share", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def merge(texts: list[str]) -> str:
    """Several expositions as one: each family once, with its HELP and TYPE from the first text that has it, then
    every text's samples of it."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    seen: set[str] = set()  # a series given by several texts (the cloud's, without worker): the first text's
    for text in texts:
        first: set[str] = set()
        family = ""
        for line in text.splitlines():
            if line.startswith("# "):
                family = line.split(" ", 3)[2]
                if family not in headers:
                    headers[family], samples[family] = [], []
                    first.add(family)
                if family in first:
                    headers[family].append(line)
            elif line:
                series = line.rpartition(" ")[0]
                if series in seen:
                    continue
                seen.add(series)
                samples.setdefault(family, []).append(line)
                headers.setdefault(family, [])
    lines = [line for family in headers for line in (*headers[family], *samples[family])]
    return "\n".join(lines) + "\n"


_CAPACITY_HELP = ("Schedulable amount per availability zone and resource class: (total - reserved) * the node's "
                  "allocation_ratio, summed over the up nodes (not down, not disabled); a node in no zoned "
                  "aggregate counts in default_availability_zone. The cloud's figure: no worker label.")
_USAGE_HELP = ("Amount used per availability zone and resource class on the nodes the capacity counts: what they "
               "report using plus the claims they have not confirmed yet. The cloud's figure: no worker label.")
_UNIT_HELP = {"": " Resource classes counted in their own units (VCPU, PCPU, VGPU, CUSTOM_*, ...).",
              "_bytes": " In bytes (MEMORY_MB and DISK_GB converted).",
              "_bits_per_second": " In bits per second (the NET_BW_* classes' kilobits converted).",
              "_packets_per_second": " In packets per second (the NET_PACKET_RATE_* classes' kilopackets "
                                     "converted)."}


def _amounts(zones: list[Any]) -> list[str]:
    """gantt_capacity* and gantt_usage*, one family per unit."""
    lines: list[str] = []
    for kind, help_text, attribute in (("capacity", _CAPACITY_HELP, "capacity"), ("usage", _USAGE_HELP, "used")):
        by_suffix: dict[str, list[str]] = {suffix: [] for suffix in _UNIT_SUFFIXES}
        for z in zones:
            unit, scale = UNITS.get(z.resource_class, ("", 1))
            suffix = f"_{unit}" if unit else ""
            amount = getattr(z, attribute)
            # An integral amount scales exactly as an int; a fractional one (a ratio) as a float.
            scaled = int(amount) * scale if float(amount).is_integer() else amount * scale
            by_suffix[suffix].append(f'gantt_{kind}{suffix}{{zone="{_escape(z.zone)}",'
                                     f'resource_class="{_escape(z.resource_class)}"}} {number(scaled)}')
        for suffix, samples in by_suffix.items():
            if samples or suffix in ("", "_bytes"):  # the usual families are declared even while empty
                lines += [*_head(f"gantt_{kind}{suffix}", "gauge", help_text + _UNIT_HELP[suffix]), *samples]
    return lines


def _behind(replica: Any, worker: str, name: str, help_text: str, labels: str = "") -> list[str]:
    """``name``: the store's head revision minus what ``replica`` applied; left out while the store cannot say
    (gantt_replica_feed_errors_total and /health do)."""
    try:
        head = replica.store.barrier()
    except Exception as exc:  # an unreachable store: the figure is unknown, not 0
        log.debug("no head revision for %s: %s", name, exc)
        return list(_head(name, "gauge", help_text))
    return [*_head(name, "gauge", help_text), f"{name}{{{worker}{labels}}} {max(0, head - replica.revision)}"]


def _head(name: str, kind: str, help_text: str) -> tuple[str, str]:
    return f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ------------------------------------------------------------------------------------ process_* metrics
# The names and meanings of Prometheus's client libraries, read from /proc where there is one (Linux); a figure
# the platform does not give is left out rather than faked.

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_IMPORTED = time.time()


def _start_time() -> float:
    """When this process started (epoch seconds): boot time plus the start tick /proc/self/stat gives."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        with open("/proc/stat") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + int(fields[19]) / _TICKS  # field 22 of stat(5); the split starts at field 3
    except (OSError, StopIteration, IndexError, ValueError):
        return _IMPORTED  # no /proc: when the service's code was loaded, seconds after the process started


def _process_lines(worker: str, start_time: float) -> list[str]:
    times = os.times()
    lines = [
        *_head("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."),
        f"process_cpu_seconds_total{{{worker}}} {times.user + times.system:.2f}",
        *_head("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds."),
        f"process_start_time_seconds{{{worker}}} {start_time:.2f}",
    ]
    try:
        with open("/proc/self/statm") as f:
            virtual, resident = (int(x) * _PAGE for x in f.read().split()[:2])
        lines += [
            *_head("process_resident_memory_bytes", "gauge", "Resident memory size in bytes."),
            f"process_resident_memory_bytes{{{worker}}} {resident}",
            *_head("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."),
            f"process_virtual_memory_bytes{{{worker}}} {virtual}",
        ]
    except (OSError, ValueError):
        pass
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_fds = -1
    if open_fds >= 0:
        lines += [*_head("process_open_fds", "gauge", "Number of open file descriptors."),
                  f"process_open_fds{{{worker}}} {open_fds}"]
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY:
        lines += [*_head("process_max_fds", "gauge", "Maximum number of open file descriptors."),
                  f"process_max_fds{{{worker}}} {soft}"]
    return lines
