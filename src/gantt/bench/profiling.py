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
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["TOP", "Phases", "Sampler", "collapsed_summary"]

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
        out = {}
        for name, profile in self._profiles.items():
            stats = pstats.Stats(profile)
            rows = stats.stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)
            whole = max(sum(tt for _, _, tt, _, _ in rows.values()), 1e-12)
            own: Counter[str] = Counter()
            total: Counter[str] = Counter()
            calls = 0
            for (file, _, function), (_, nc, tt, ct, _) in rows.items():
                key = f"{function} ({Path(file).name})" if file != "~" else function
                own[key] += tt
                total[key] = max(total[key], ct)
                calls += nc
            out[name] = {
                "seconds": round(whole, 4), "calls": calls,
                "self": [{"function": k, "share": round(v / whole, 4), "seconds": round(v, 4)}
                         for k, v in own.most_common(self._top)],
                "total": [{"function": k, "share": round(v / whole, 4), "seconds": round(v, 4)}
                          for k, v in total.most_common(self._top)],
            }
        return out
