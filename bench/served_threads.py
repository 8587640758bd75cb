"""Server CPU per placement (or per host report) by thread: ``python bench/served_threads.py --hosts 100000 --json``.

A real ``gantt serve --workers 2`` on a temporary SQLite file, ``--hosts`` hosts registered with bench/mixed.py's
report, then one of bench/mixed.py's streams alone for ``--duration`` seconds, paced at ``--rate``: placements
(each followed by the release of the oldest once ``--hold`` are held), or with ``--stream reports`` host reports
(``--changing`` of them with moved figures, the rest repeating their node's record). Prints the stream's figures
and the server's CPU per request, in all and per thread name summed over the workers (from
/proc/<pid>/task/*/stat; the names from ``py-spy dump`` when it is installed beside the interpreter, else thread
ids): where a request's CPU goes (the decider or the event loop, the SQLite writer, the feed applying the other
worker's writes), at one size or build against another under the same stream.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gantt.bench.engine import bench_script, cpu_model
from gantt.cli.server_process import ServerProcess


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _thread_names(pid: int) -> dict[int, str]:
    """Python's thread names (numbered pool threads merged: ``gantt-handler_3`` -> ``gantt-handler``)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return {}
    try:
        dump = subprocess.run([str(spy), "dump", "--pid", str(pid), "--nonblocking"], capture_output=True,
                              text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(m.group(1)): re.sub(r"_\d+$", "", m.group(2))
            for m in re.finditer(r'Thread (\d+) \([^)]*\): "([^"]+)"', dump)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="target placements per second")
    parser.add_argument("--hold", type=int, default=5000, help="allocations held before each placement is "
                                                                "followed by a release")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--stream", choices=["placements", "reports"], default="placements")
    parser.add_argument("--changing", type=float, default=0.1, help="reports: the share with moved figures")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    args = parser.parse_args(argv)
    mixed = bench_script(__file__, "mixed")
    load_before = os.getloadavg()[0]
    config = {"filter_scheduler": {"shuffle_best_same_weighed_hosts": True}, "scheduler": {"max_attempts": 1}}
    with tempfile.TemporaryDirectory(prefix="gantt-bench-threads-") as tmp:
        server = ServerProcess(f"sqlite:///{tmp}/gantt.sqlite", workers=args.workers, config=config, workdir=tmp)
        try:
            server.start(timeout=180)
            assert server.proc is not None
            mixed.bench_http._use_uvloop()
            asyncio.run(mixed.register(server.port, args.hosts, 1000))
            mixed.bench_http.wait_replicas(server.url, args.workers, args.hosts, timeout=300)
            stream = mixed.Placer(args.hold) if args.stream == "placements" \
                else mixed.Reporter(args.hosts, args.changing, seed=1)
            # warm-up, and (up to 5,000) the held allocations filled so that the phase measured releases as it places
            warm = min(args.hold, 5000) + 1000
            asyncio.run(mixed.paced(args.rate, warm, warm / args.rate + 3.0, args.concurrency, "127.0.0.1",
                                    server.port, stream.send))
            if args.stream == "reports":
                stream.figures(warm, 1.0)  # the measured reports go on with the hosts after the warm-up's
            workers = _children(server.proc.pid) or [server.proc.pid]  # one worker: the server itself
            time.sleep(2.0)
            before = {w: _thread_cpu(w) for w in workers}
            cpu = mixed.cpu_seconds(server.proc.pid)
            stream.reset()
            sent = asyncio.run(mixed.paced(args.rate, 1_000_000, args.duration, args.concurrency, "127.0.0.1",
                                           server.port, stream.send))
            cpu = mixed.cpu_seconds(server.proc.pid) - cpu
            after = {w: _thread_cpu(w) for w in workers}
            threads: dict[str, float] = {}
            for w in workers:
                names = _thread_names(w)
                for tid, seconds in after[w].items():
                    name = names.get(tid, "MainThread" if tid == w else f"thread-{tid}")
                    threads[name] = threads.get(name, 0.0) + seconds - before[w].get(tid, 0.0)
        finally:
            server.stop()
    figures = stream.figures(*sent)
    done = max(1, figures["placed"] if args.stream == "placements" else figures["reports"])
    per = "placement" if args.stream == "placements" else "report"
    summary = {
        "hosts": args.hosts, args.stream: figures,
        f"server_cpu_ms_per_{per}": round(cpu * 1000 / done, 3),
        f"by_thread_ms_per_{per}": {name: round(s * 1000 / done, 3)
                                    for name, s in sorted(threads.items(), key=lambda kv: -kv[1]) if s > 0},
        "load_average_1m_before": load_before, "load_average_1m": os.getloadavg()[0], "cpu": cpu_model(),
    }
    print(json.dumps(summary, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
