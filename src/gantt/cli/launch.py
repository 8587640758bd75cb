"""The commands that start something rather than talk to a service: ``gantt serve`` (the HTTP service),
``gantt bench`` and ``gantt simulate`` (a benchmark's or the simulator's own command line, handed every argument
after their name), and ``gantt demo``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gantt.cli import terminal
from gantt.cli.terminal import STORE_UNUSABLE
from gantt.model import GanttError

BENCHMARKS = ["engine", "http_api", "cluster"]


def cmd_serve(args: argparse.Namespace) -> int:
    from gantt.compute.scheduler import Scheduler
    from gantt.config import load_config
    from gantt.placement.api import Policy
    from gantt.service.server import ServeError, ServeOptions, serve

    config_path = args.config or os.environ.get("GANTT_CONFIG") or None
    try:
        config = load_config(config_path, log_unused=False)  # listed once by the server's start-up line
        Scheduler(config)  # unknown filters or weighers: say so now, not in every worker's log
        Policy.of(config.oslo_policy)  # likewise a policy file that cannot be enforced as written
    except (GanttError, ValueError, OSError) as exc:
        terminal.err_console.print(f"gantt serve: bad configuration: {exc}", markup=False, soft_wrap=True)
        return 2
    options = ServeOptions(
        store=args.store or config.gantt.store, host=args.host or config.gantt.bind,
        port=args.port if args.port is not None else config.gantt.port, config_path=config_path,
        workers=args.workers or config.scheduler.workers or 1,
        token=os.environ.get("GANTT_TOKEN") or config.gantt.token, fd=args.fd,
        log_level=args.log_level)
    try:
        return serve(options)
    except ServeError as exc:
        # no markup: the message may name "[gantt] token"
        terminal.err_console.print(f"gantt serve: {exc}", markup=False, soft_wrap=True)
        return STORE_UNUSABLE if exc.store else 2
    except OSError as exc:
        terminal.err_console.print(f"gantt serve: cannot bind {options.host}:{options.port}: {exc}", markup=False,
                                   soft_wrap=True)
        return 2


def add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the HTTP service")
    p.add_argument("--store", help="store URL: sqlite:///path (default [gantt] store, sqlite:///gantt.sqlite), "
                                   "etcd://host:port[,…] or memory://")
    p.add_argument("--host", help="address to bind (default [gantt] bind, 127.0.0.1); anything but loopback "
                                  "needs a token")
    p.add_argument("--port", type=int, help="port (default [gantt] port, 8780)")
    p.add_argument("--config", help="config file, TOML or nova.conf-style INI (env GANTT_CONFIG)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes on one store, each with its own replica (default: [scheduler] workers, else 1)")
    p.add_argument("--fd", type=int, help="serve on this inherited listening socket instead of binding")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="log level (default %(default)s); info adds one line per answer on gantt.access")
    p.set_defaults(func=cmd_serve)


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def load_entry(candidates: Sequence[str], func: str = "main") -> Callable[[list[str]], Any] | None:
    """The first importable ``module:main`` of ``candidates`` (dotted names, or paths relative to the repo)."""
    for candidate in candidates:
        module: Any = None
        if candidate.endswith(".py"):
            path = _repo_root() / candidate
            if not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location(f"gantt_bench_{path.stem}", path)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            try:
                module = importlib.import_module(candidate)
            except ModuleNotFoundError as exc:
                if exc.name is not None and candidate.startswith(exc.name):
                    continue  # the module itself is missing; an import error inside it must surface
                raise
        entry = getattr(module, func, None)
        if callable(entry):
            return entry  # type: ignore[no-any-return]  # a module's attribute is Any
    return None


def _run_entry(entry: Callable[[list[str]], Any], argv: list[str]) -> int:
    result = entry(argv)
    return result if isinstance(result, int) else 0


def cmd_bench(args: argparse.Namespace) -> int:
    candidates = [f"bench/{args.which}.py", f"bench.{args.which}", f"gantt.bench.engine.{args.which}"]
    entry = load_entry(candidates)
    if entry is None:
        terminal.err_console.print(f"gantt bench {args.which}: no benchmark found (looked for bench/{args.which}.py "
                                   f"with a main(argv) function under {_repo_root()}); it may not be written yet",
                                   soft_wrap=True)
        return 2
    return _run_entry(entry, args.args)


def cmd_simulate(args: argparse.Namespace) -> int:
    entry = load_entry(["gantt.sim.cli"])
    if entry is None:
        terminal.err_console.print("gantt simulate: the simulator's command line (gantt.sim.cli.main) is not "
                                   "available yet")
        return 2
    return _run_entry(entry, args.args)


def cmd_demo(args: argparse.Namespace) -> int:
    from gantt.cli.demo import run_demo

    return run_demo(hosts=args.hosts, requests=args.requests, concurrency=args.concurrency, store=args.store,
                    stay=args.stay)


def add_bench(sub: Any) -> None:
    # bench and simulate are parsed by the dispatch's passthrough; these entries document them in --help.
    p = sub.add_parser("bench", help="run a benchmark (bench/engine.py, bench/http_api.py, bench/cluster.py)")
    p.add_argument("which", choices=BENCHMARKS, help="which benchmark")
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the benchmark")
    p.set_defaults(func=cmd_bench)


def add_simulate(sub: Any) -> None:
    p = sub.add_parser("simulate", help="run the simulator (gantt.sim.cli)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the simulator")
    p.set_defaults(func=cmd_simulate)


def add_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="start a service on a temporary store, register hosts, place a burst")
    p.add_argument("--hosts", type=int, default=300, help="hosts to register (default %(default)s)")
    p.add_argument("--requests", type=int, default=1000, help="requests to place (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight at once (default %(default)s)")
    p.add_argument("--store", choices=["sqlite", "memory"], default="sqlite",
                   help="store kind (default %(default)s)")
    p.add_argument("--stay", action="store_true",
                   help="afterwards keep the service and its live view (/ui) up until Ctrl-C")
    p.set_defaults(func=cmd_demo)
