"""A fresh ``gantt serve`` per Nova functional test, in milliseconds: a server factory per test worker.

Each of Nova's functional tests starts with an empty Placement, so each gets its own Gantt server on its own store.
Started as a new process, ``gantt serve`` spends about 1.5 s importing before it answers, which over the ~800 tests
of the issue's modules would add some 20 minutes of CPU to a shared machine. This factory imports the server's
modules once, then forks one child per test: the child runs ``gantt.service.server.serve`` (the code path ``gantt
serve --fd`` runs) on a listening socket the factory bound on loopback, with the store the test asked for.

The factory never runs Nova's code: it is started by the test worker (``Factory``) as a separate interpreter, since
the worker is monkey-patched by eventlet and holds Nova's threads, neither of which a forked server should inherit.
It forks only while it has a single thread and no event loop (checked before each fork).

Protocol, one JSON document per line on stdin/stdout: ``{"serve": store, "config": path, "log": path}`` answers
``{"pid": n, "port": n}``; ``{"stop": pid}`` kills that child (SIGKILL: its store is thrown away) and answers
``{"stopped": pid}``. End of stdin (the worker exited) kills every child left, as does the factory's own death
(each child asks for SIGKILL on its parent's death).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from gantt.service import lifeline

KEEP_ALIVE = 600  # seconds; longer than any Nova functional test (their timeout: 160 s)


def _preload() -> None:
    """Everything a served worker imports, so that a forked child imports (almost) nothing."""
    import uvicorn
    import uvicorn.protocols.http.httptools_impl

    import gantt.service.app
    import gantt.service.namespaces
    import gantt.service.openapi.document
    import gantt.service.protocol
    import gantt.service.server

    # uvicorn closes a keep-alive connection idle for 5 s (gantt serve's setting), and Gantt's protocol answers 408
    # and closes one whose next request head has not come 10 s after the last answer. Nova's report client keeps its
    # connections pooled, and a request it sends in the instant the server closes one fails ("Remote end closed
    # connection without response", or "Placement API service is not responding"): on a loaded machine Nova's tests
    # pause about that long often enough to hit it. Each server here lives for one test, and its one client is
    # Nova's: its connections stay open for the test.
    gantt.service.protocol.HEAD_TIMEOUT = KEEP_ALIVE

    class Config(uvicorn.Config):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "timeout_keep_alive": KEEP_ALIVE})

    uvicorn.Config = Config  # type: ignore[misc]  # a class swapped in for the test servers

    # Each app serves the same OpenAPI document, which takes a second to build: built once here, before the forks.
    document = gantt.service.openapi.document.openapi()
    gantt.service.app.openapi = lambda: document  # type: ignore[attr-defined]  # app imported the name: swapped where it is read


def _child(sock: socket.socket, store: str, config: str | None, log: str) -> int:
    from gantt.service.server import ServeOptions, serve

    lifeline.die_with_parent()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(0)
    return serve(ServeOptions(store=store, host="127.0.0.1", port=0, config_path=config, fd=sock.fileno()))


def _serve(store: str, config: str | None, log: str) -> dict[str, int]:
    if threading.active_count() != 1:
        raise RuntimeError(f"the factory has {threading.active_count()} threads: it must not fork")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)  # connections made before the child's loop runs wait here
    port = sock.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            status = _child(sock, store, config, log)
        finally:
            os._exit(status)
    sock.close()
    return {"pid": pid, "port": port}


def _stop(pid: int, children: set[int]) -> None:
    if pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        children.discard(pid)


def main() -> None:
    lifeline.die_with_parent()
    _preload()
    children: set[int] = set()
    out = sys.stdout
    try:
        for line in sys.stdin:
            request = json.loads(line)
            answer: dict[str, Any]
            try:
                if "serve" in request:
                    answer = _serve(request["serve"], request.get("config"), request["log"])
                    children.add(answer["pid"])
                else:
                    _stop(int(request["stop"]), children)
                    answer = {"stopped": request["stop"]}
            except Exception as exc:  # the worker reports it in the test that asked
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()
    finally:
        for pid in list(children):
            _stop(pid, children)


class Factory:
    """The test worker's side: starts the factory on first use, asks it for servers."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()  # green or real threads of one worker may ask at once

    def _process(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
            with open(self.log_dir / "factory.log", "ab") as log:
                self._proc = subprocess.Popen(
                    lifeline.command([sys.executable, "-m", "gantt.nova.functional.forkserver"]),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                    start_new_session=True)
        return self._proc

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            proc = self._process()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Gantt server factory exited ({proc.poll()}); see {self.log_dir}/factory.log")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the Gantt server factory: {answer['error']}")
        return answer

    def serve(self, store: str, config: Path | None, log: Path) -> tuple[int, int]:
        """A new server on ``store``: (pid, port). It accepts connections at once; it answers once started."""
        answer = self._ask({"serve": store, "config": str(config) if config else None, "log": str(log)})
        return int(answer["pid"]), int(answer["port"])

    def stop(self, pid: int) -> None:
        self._ask({"stop": pid})

    def close(self) -> None:
        if self._proc is not None:
            stdin: IO[str] | None = self._proc.stdin
            if stdin is not None:
                stdin.close()
            self._proc.wait(10)


if __name__ == "__main__":
    main()
