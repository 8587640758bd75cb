"""The periodic read of Nova's cell databases (gantt.nova.cells), full against incremental, at one cell's size.

    V=~/.cache/gantt/nova-functional-nova-34.0.0-py311/bin/python
    $V bench/nova_cellread.py [--nodes 1000] [--repeat 3]

Runs in Nova's environment. Builds one cell of ``--nodes`` services and compute nodes in bulk by SQL
(bench/nova_rpc.py's templates and clones, no broker, no Placement), a Gantt replica on a SQLite store, and
Gantt's ``CellReader`` on them, then times, ``--repeat`` times each (median and all, seconds):

- ``full``: ``CellReader.refresh``, every node read and decoded, the unchanged heartbeaten: what the periodic pass
  did each ``cell_poll_interval`` before it was incremental, and still does every ``FULL_READ_EVERY``-th pass;
- ``quiet``: ``CellReader.poll`` with no row changed;
- ``heartbeats``: ``poll`` after every service heartbeated (``last_seen_up``, ``updated_at``, as nova-compute's
  servicegroup writes every report_interval): no node read;
- ``one_node``: ``poll`` after one node's row changed as nova-compute's resource tracker writes it after a claim.

``--ab``: instead, the heartbeats alone, A/B in this one process on CPU clocks (the process's and this thread's,
seconds), alternated A B B A ``--repeat`` times: a quiet ``poll`` and a full ``refresh``, A with the reader's
heartbeat tokens dropped before the pass (every node the long way: a merge and a comparison each, as before
gantt.nova.heartbeats), B with them kept (each node an identity check).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent)]
import nova_rpc  # noqa: E402 - this checkout's src on the path, Nova monkey-patched, the bulk rows
from gantt.config import Config  # noqa: E402
from gantt.nova import cells  # noqa: E402
from gantt.nova.heartbeats import Heartbeats  # noqa: E402
from gantt.replication.replica import Replica  # noqa: E402


def _timed(step: Callable[[], Any]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def _figures(values: list[float]) -> dict[str, Any]:
    return {"median_s": round(statistics.median(values), 4), "all_s": [round(v, 4) for v in values]}


def _cpu(step: Callable[[], Any]) -> tuple[float, float]:
    """(process CPU, this thread's CPU) seconds ``step`` took."""
    process, thread = time.process_time(), time.thread_time()
    step()
    return time.process_time() - process, time.thread_time() - thread


def _ab(reader: Any, ctxt: Any, repeat: int) -> dict[str, Any]:
    """Quiet polls and full refreshes, A (tokens dropped: the long way) and B (tokens kept), A B B A each round."""
    reader.poll(ctxt)  # the rows within the tie window of the first read, once
    time.sleep(1.1)
    reader.poll(ctxt)  # every node has its token now
    runs: dict[str, list[tuple[float, float]]] = {f"{kind}_{side}": [] for kind in ("heartbeats", "quiet", "full")
                                                  for side in ("A", "B")}
    held = [report for view in reader.cells.values() for report in view.nodes.values()]

    def heartbeats(_: Any) -> None:  # the step alone: every node of the cell, as a quiet pass gives them
        reader._heartbeat(held)

    for _ in range(repeat):
        for side in ("A", "B", "B", "A"):
            for kind, step in (("heartbeats", heartbeats), ("quiet", reader.poll), ("full", reader.refresh)):
                if side == "A":
                    reader._beats = Heartbeats()  # no token: every node the long way
                slow = reader.slow_heartbeats
                runs[f"{kind}_{side}"].append(_cpu(lambda step=step: step(ctxt)))
                assert side == "A" or reader.slow_heartbeats - slow < 10, "the tokens did not hold"
    out: dict[str, Any] = {}
    for name, values in runs.items():
        out[name] = {"process_cpu_median_s": round(statistics.median(v[0] for v in values), 4),
                     "thread_cpu_median_s": round(statistics.median(v[1] for v in values), 4),
                     "process_cpu_all_s": [round(v[0], 4) for v in values]}
    out["nodes_heartbeaten"] = len(held)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="a quiet pass's profile on stderr")
    parser.add_argument("--ab", action="store_true", help="heartbeats by token (B) against the long way (A), CPU")
    args = parser.parse_args(argv)
    from nova import context, objects

    with tempfile.TemporaryDirectory(prefix="gantt-cellread-") as tmp:
        work = Path(tmp)
        nova = nova_rpc.Nova(work, "fake:/")
        cell_db = work / "cell.db"
        shutil.copy(nova.cell_template, cell_db)
        nova_rpc._clone_rows(cell_db, args.nodes)
        ctxt = context.get_admin_context()
        objects.CellMapping(ctxt, uuid=str(uuidlib.uuid4()), name="bench", transport_url="fake:/",
                            database_connection=f"sqlite:///{cell_db}").create()
        replica = Replica.open(f"sqlite:///{work}/gantt.sqlite", Config())
        try:
            reader = cells.CellReader(replica)
            first = _timed(lambda: reader.refresh(ctxt))  # every report written
            out: dict[str, Any] = {"nodes": args.nodes, "first_full_s": round(first, 4)}
            if args.ab:
                out.update(_ab(reader, ctxt, args.repeat), machine=nova_rpc.machine())
                json.dump(out, sys.stdout, indent=1)
                print()
                return 0
            full = [_timed(lambda: reader.refresh(ctxt)) for _ in range(args.repeat)]
            reader.poll(ctxt)  # the rows within the tie window of the last read, once
            time.sleep(1.1)
            reader.poll(ctxt)
            quiet = [_timed(lambda: reader.poll(ctxt)) for _ in range(args.repeat)]
            if args.profile:
                import cProfile
                import pstats

                profile = cProfile.Profile()
                profile.runcall(reader.poll, ctxt)
                pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
            beats, one = [], []
            with contextlib.closing(sqlite3.connect(cell_db, isolation_level=None)) as conn:
                for i in range(args.repeat):
                    conn.execute("UPDATE services SET report_count = report_count + 1, last_seen_up = ?, "
                                 "updated_at = ? WHERE deleted = 0", (nova_rpc._now(), nova_rpc._now()))
                    beats.append(_timed(lambda: reader.poll(ctxt)))
                    conn.execute("UPDATE compute_nodes SET vcpus_used = vcpus_used + 1, updated_at = ? WHERE host = ?",
                                 (nova_rpc._now(), nova_rpc.node_name(i)))
                    read = reader.nodes_read
                    one.append(_timed(lambda: reader.poll(ctxt)))
                    out.setdefault("one_node_rows_read", []).append(reader.nodes_read - read)
                    time.sleep(1.1)  # past the tie window, so the next figures are not ties' re-reads
                    reader.poll(ctxt)
            out.update(full=_figures(full), quiet=_figures(quiet), heartbeats=_figures(beats),
                       one_node=_figures(one), machine=nova_rpc.machine())
        finally:
            replica.stop()
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
