"""Where the time goes, for the benchmarks' ``--profile``: the top functions of each phase, by their own time and
by the time spent under them, so that the next lever shows without an ad-hoc build.

Two sources, one summary shape:
- a served process (``gantt serve`` and its workers) is sampled from outside by py-spy (``Sampler``): no code of
  the server changes, every thread is seen, and what the interpreter lock makes wait is not counted as work;
- in-process phases run under cProfile (``Phases``), thread by thread as cProfile sees them.

A summary: ``{"samples" | "calls", "self": [...], "total": [...]}``, each entry a function (``name (file)``) with
its share of the phase; a sampled one also has ``packages``, the share of stacks through each of Gantt's packages.
Sampling perturbs the figures it runs beside (py-spy takes some CPU of its own, cProfile
slows Python calls several-fold): read a profiled run for its proportions, not its rates.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["TOP", "Phases", "Sampler", "ThreadProfiles", "collapsed_summary", "merge_rows", "stats_summary",
           "subtract_rows"]

TOP = 15
RATE = 250  # py-spy samples per second
_LINE = re.compile(r":\d+\)$")  # a frame's line number: functions are summed over their lines
_PROCESS = re.compile(r"^process \d+:")
SCAFFOLDING = 0.97  # a function on at least this share of a phase's stacks is left out of its "total" list
_OURS = re.compile(r"\((gantt/|[^()]*/gantt/)")  # a frame in Gantt's package (py-spy names "gantt/store/x.py")
_PACKAGE = re.compile(r"\((?:[^()]*/)?gantt/(\w+)/")  # a frame's package in Gantt: compute, store, service, …
_ENTRY = re.compile(r"^<module> |\(gantt/(__main__|cli|service/server|lifeline)\.py\)$")


def _function(frame: str) -> str:
    return _LINE.sub(")", frame.strip())


def _entries(counts: Counter[str], whole: int, top: int) -> list[dict[str, Any]]:
    return [{"function": name, "share": round(n / whole, 4), "samples": n} for name, n in counts.most_common(top)]


def collapsed_summary(lines: Iterable[str], top: int = TOP) -> dict[str, Any]:
    """py-spy's raw output (one ``frame;frame;…;leaf count`` line per distinct stack) summed per function: its own
    samples (it was the leaf) and its total (it was anywhere on the stack, counted once per stack)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    samples = 0
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        # --subprocesses puts the process as a stack's first frame: summed per function across the processes
        frames = [_function(f) for f in stack.split(";") if f and not _PROCESS.match(f)]
        if not frames:
            continue
        samples += n
        own[frames[-1]] += n
        for name in set(frames):
            total[name] += n
        for package in {m.group(1) for f in frames if (m := _PACKAGE.search(f))}:
            packages[package] += n
    whole = max(samples, 1)
    # Totals name Gantt's own functions, below the process's entry (what is under every stack of a thread: its
    # bootstrap, the event loop's run, `gantt serve` starting) says nothing about the phase; the libraries and the
    # interpreter show in the "self" list, where the time is spent.
    ours = Counter({name: n for name, n in total.items() if _OURS.search(name) and not _ENTRY.search(name)
                    and n < SCAFFOLDING * whole})
    # Per package of Gantt, the share of stacks through it: the top functions of a loaded machine's short phase can
    # all be one layer's (the service's), and this still says how much was the engine's, the store's, ….
    shares = {name: round(n / whole, 4) for name, n in sorted(packages.items())}
    return {"samples": samples, "self": _entries(own, whole, top), "total": _entries(ours, whole, top),
            "packages": shares}


def py_spy() -> str | None:
    """The py-spy beside this interpreter (the test extra installs it), else on the PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Sampler:
    """py-spy recording ``pid`` and its children while the ``with`` block runs; ``summary`` afterwards."""

    def __init__(self, pid: int, top: int = TOP, rate: int = RATE) -> None:
        binary = py_spy()
        if binary is None:
            raise RuntimeError("--profile needs py-spy (pip install -e '.[test]')")
        self._out = Path(tempfile.mkstemp(prefix="gantt-profile-", suffix=".txt")[1])
        self._argv = [binary, "record", "--format", "raw", "--rate", str(rate), "--subprocesses", "--nonblocking",
                      "--pid", str(pid), "--output", str(self._out)]
        self._top = top
        self._proc: subprocess.Popen[bytes] | None = None
        self.summary: dict[str, Any] | None = None

    def __enter__(self) -> Sampler:
        self._proc = subprocess.Popen(self._argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)  # py-spy writes what it has on an interrupt
        try:
            _, err = self._proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            _, err = self._proc.communicate()
        try:
            text = self._out.read_text() if self._out.exists() else ""
            self.summary = collapsed_summary(text.splitlines(), self._top)
            if not self.summary["samples"]:
                self.summary["error"] = err.decode(errors="replace").strip()[-500:]
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self._out)


class Phases:
    """cProfile per named phase of an in-process benchmark: ``with phases.phase("decisions"): …``."""

    def __init__(self, top: int = TOP) -> None:
        self._top = top
        self._profiles: dict[str, cProfile.Profile] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        profile = self._profiles.setdefault(name, cProfile.Profile())
        profile.enable()
        try:
            yield
        finally:
            profile.disable()

    def summary(self) -> dict[str, dict[str, Any]]:
        return {name: stats_summary(pstats.Stats(profile).stats, self._top)  # type: ignore[attr-defined]  # see below
                for name, profile in self._profiles.items()}


# pstats' rows: (file, line, function) -> (primitive calls, calls, own seconds, seconds under it, callers)
Rows = Mapping[tuple[str, int, str], tuple[Any, Any, Any, Any, Any]]


def stats_summary(rows: Rows, top: int = TOP) -> dict[str, Any]:
    """cProfile's rows summed per function: its own time and the time under it, as shares of the phase's."""
    whole = max(sum(tt for _, _, tt, _, _ in rows.values()), 1e-12)
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    calls = 0
    for (file, _, function), (_, nc, tt, ct, _) in rows.items():
        key = f"{function} ({Path(file).name})" if file != "~" else function
        own[key] += tt
        total[key] = max(total[key], ct)
        calls += nc
    return {
        "seconds": round(whole, 4), "calls": calls,
        "self": [{"function": k, "share": round(v / whole, 4), "seconds": round(v, 4)}
                 for k, v in own.most_common(top)],
        "total": [{"function": k, "share": round(v / whole, 4), "seconds": round(v, 4)}
                  for k, v in total.most_common(top)],
    }


def merge_rows(parts: Iterable[Rows]) -> Rows:
    """Rows of several profiles (threads, processes) added up, as ``pstats.Stats.add`` would (callers dropped)."""
    out: dict[tuple[str, int, str], list[Any]] = {}
    for rows in parts:
        for key, (cc, nc, tt, ct, _) in rows.items():
            acc = out.setdefault(key, [0, 0, 0.0, 0.0, {}])
            acc[0] += cc
            acc[1] += nc
            acc[2] += tt
            acc[3] += ct
    return {key: (cc, nc, tt, ct, callers) for key, (cc, nc, tt, ct, callers) in out.items()}


def subtract_rows(after: Rows, before: Rows) -> Rows:
    """What ``after`` (a later snapshot of the same profile) counted since ``before``: a benchmark's measured rounds
    without its setup, from profiles that ran through both (callers dropped)."""
    out: dict[tuple[str, int, str], tuple[Any, Any, Any, Any, Any]] = {}
    for key, (cc, nc, tt, ct, _) in after.items():
        old = before.get(key)
        if old is not None:
            cc, nc, tt, ct = cc - old[0], nc - old[1], tt - old[2], ct - old[3]
        if nc > 0 or tt > 0:
            out[key] = (cc, nc, tt, ct, {})
    return out


class ThreadProfiles:
    """cProfile on every thread this process starts after ``start()`` (a served replica's clients, its committer,
    its watch and feed), one profile per thread, read together by ``rows()`` while they still run.

    ``threading.setprofile`` installs a hook in each new thread before it runs; its first call swaps itself for a
    cProfile of that thread. A profile is read without being stopped (stopping one from another thread would
    unwind the wrong thread's calls): the calls still open at that moment are not counted."""

    def __init__(self) -> None:
        self._profiles: list[tuple[str, cProfile.Profile]] = []
        self._lock = threading.Lock()

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile(time.thread_time)  # CPU, not wall: a thread waiting for etcd is not working
        with self._lock:
            self._profiles.append((threading.current_thread().name, profile))
        profile.enable()  # replaces this hook for the thread

    def start(self) -> ThreadProfiles:
        threading.setprofile(self._hook)
        return self

    def rows(self, stop: bool = True) -> dict[str, Rows]:
        """Every thread's rows so far, added up per thread name (``Thread-3 (client)`` and ``Thread-9 (client)``
        are both ``client``); with ``stop``, the hook is removed, so threads started from now on are not profiled
        (without it: a snapshot to subtract from a later one, ``subtract_rows``)."""
        if stop:
            threading.setprofile(None)  # None clears the hook
        with self._lock:
            profiles = list(self._profiles)
        parts: dict[str, list[Rows]] = {}
        for name, profile in profiles:
            profile.snapshot_stats()  # the rows, without disable(): see the class's docstring
            rows = profile.stats  # set by snapshot_stats
            parts.setdefault(re.sub(r"\d+$", "", re.sub(r"^Thread-\d+ \((.*)\)$", r"\1", name)), []).append(rows)
        return {name: merge_rows(rows) for name, rows in parts.items()}
