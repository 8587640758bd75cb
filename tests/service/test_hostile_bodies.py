"""Request bodies from hostile or broken clients, against a real ``gantt serve`` (issue 30, items 6, 8, 9 and 12):

- one body limit for every mount, enforced before the body is read: a declared Content-Length above
  ``[gantt] max_body_bytes`` is answered 413 while the body is still unsent (``/v1`` and the Placement face, in
  each one's error body), and a chunked body is cut when it passes the limit;
- a hot route checks its token from the request head: a tokenless client is answered 401 and cut off before it
  sends its body, so that many of them cannot pin the server's memory;
- a body must arrive within ``BODY_TIMEOUT`` of its head (a slow body is cut as a slow head is), and the bodies a
  worker holds at once stay within its buffer budget (past it: 503 before reading);
- a client hanging up mid-body is a client disconnect (its own count, one log line), not a server bug;
- cpu_info given as JSON text is held to the depth limit, so that no decision fails on a node's report later.

Every connection here is on loopback, and every test is bounded in bytes and seconds.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from gantt.service import protocol
from tests.conftest import host_stats
from tests.service.server import ServerProcess
from tests.service.test_connection_limits import _read_all

TOKEN = "hostile-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY_TIMEOUT = getattr(protocol, "BODY_TIMEOUT", 10.0)  # (a default where it is not: to see these fail without it)
MAX_BODY = 4 * 1024 * 1024  # [gantt] max_body_bytes' default
BUFFER = 12 * 1024 * 1024  # GANTT_BODY_BUFFER_BYTES for the server here: three bodies near the limit


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("hostile")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", workdir=workdir, token=TOKEN, log_level="info",
                       config={"DEFAULT": {"service_down_time": 86400}},
                       env={"GANTT_BODY_BUFFER_BYTES": str(BUFFER)}) as process:
        yield process


def _connect(server: ServerProcess) -> socket.socket:
    url = urlsplit(server.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=BODY_TIMEOUT + 10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _head(method: str, path: str, length: int | None, *, token: bool = True, chunked: bool = False,
          placement: bool = False) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: gantt", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    if token:
        lines.append(f"X-Auth-Token: {TOKEN}" if placement else f"Authorization: Bearer {TOKEN}")
    if placement:
        lines.append("OpenStack-API-Version: placement latest")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def _body(answer: bytes) -> dict[str, object]:
    return json.loads(answer.partition(b"\r\n\r\n")[2])  # type: ignore[no-any-return]


def _rss(server: ServerProcess) -> int:
    """The serving process's resident memory, in bytes (its pid: /health, with the token)."""
    pid = httpx.get(f"{server.url}/health", headers=AUTH, timeout=10).json()["pid"]
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match, status
    return int(match.group(1)) * 1024


def _metric(server: ServerProcess, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", headers=AUTH, timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


# --------------------------------------------------------------------------------------------- body limit


@pytest.mark.parametrize(("path", "placement"), [("/placement/resource_providers", True),
                                                 ("/v1/aggregates/1", False), ("/v1/resource-stats", False)])
def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(server: ServerProcess, path: str,
                                                                      placement: bool) -> None:
    """A 100 MB Content-Length: the 413 comes back while not a byte of the body has been sent (the Placement face
    read such a body whole, +962 MB, before its 400), in the face's own error body."""
    method = "PUT" if path == "/v1/aggregates/1" else "POST"
    with _connect(server) as sock:
        sock.sendall(_head(method, path, 100 * 1024 * 1024, placement=placement))
        answer = _read_all(sock)
    assert _status(answer) == 413, answer[:300]
    body = _body(answer)
    if placement:
        assert body["errors"][0]["status"] == 413  # type: ignore[index]
    else:
        assert body["status"] == 413 and body["field"] == "content-length"


@pytest.mark.parametrize(("path", "placement"), [("/placement/resource_providers", True),
                                                 ("/v1/aggregates/1", False)])
def test_a_chunked_body_is_cut_at_the_limit(server: ServerProcess, path: str, placement: bool) -> None:
    method = "PUT" if path == "/v1/aggregates/1" else "POST"
    sent = 0
    with _connect(server) as sock:
        sock.sendall(_head(method, path, None, chunked=True, placement=placement))
        chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        try:
            while sent < 6 * MAX_BODY:  # a server reading on would take all of it; this one stops at the limit
                sock.sendall(chunk)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = _read_all(sock)
    assert sent < 6 * MAX_BODY
    if answer:  # the 413 may be lost to a reset when the client is still sending as the server closes
        assert _status(answer) == 413, answer[:300]
        body = _body(answer)
        assert (body["errors"][0]["status"] if placement else body["status"]) == 413  # type: ignore[index]


# ------------------------------------------------------------------------------------------ tokenless bodies


def test_a_tokenless_hot_request_is_refused_from_its_head(server: ServerProcess) -> None:
    """The 401 arrives while the body is unsent, and the connection closes: nothing waits for the body."""
    started = time.monotonic()
    with _connect(server) as sock:
        sock.sendall(_head("POST", "/v1/resource-stats", 3_900_000, token=False) + b'{"name": ')
        answer = _read_all(sock)
    assert _status(answer) == 401, answer[:300]
    assert _body(answer)["status"] == 401
    assert time.monotonic() - started < BODY_TIMEOUT / 2


def test_tokenless_clients_cannot_pin_memory(server: ServerProcess) -> None:
    """80 tokenless connections, each announcing 3.9 MB to a hot route and sending 1 MB of it: the server's memory
    does not grow by what they send (it held +211-310 MB before), and none of them stays open."""
    before = _rss(server)
    socks = []
    try:
        for _ in range(80):
            sock = _connect(server)
            socks.append(sock)
            sock.sendall(_head("POST", "/v1/select_destinations", 3_900_000, token=False))
            try:
                for _ in range(16):
                    sock.sendall(b" " * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
        grown = _rss(server) - before
        closed = 0
        for sock in socks:
            sock.settimeout(5)
            answer = _read_all(sock)
            closed += 1
            assert not answer or _status(answer) == 401, answer[:300]
    finally:
        for sock in socks:
            sock.close()
    assert closed == 80
    assert grown < 40 * 1024 * 1024, f"the server grew by {grown / 2**20:.0f} MB"


# ---------------------------------------------------------------------------------------- body deadline


@pytest.mark.parametrize(("path", "placement"), [("/v1/resource-stats", False), ("/v1/aggregates/1", False),
                                                 ("/placement/resource_providers", True)])
def test_a_stalled_body_is_cut_at_the_deadline(server: ServerProcess, path: str, placement: bool) -> None:
    method = "PUT" if path == "/v1/aggregates/1" else "POST"
    started = time.monotonic()
    with _connect(server) as sock:
        sock.sendall(_head(method, path, 1000, placement=placement) + b'{"name": "')
        answer = _read_all(sock)
    took = time.monotonic() - started
    assert BODY_TIMEOUT - 1 < took < BODY_TIMEOUT + 5, took
    assert _status(answer) == 408, answer[:300]
    body = _body(answer)
    assert (body["errors"][0]["status"] if placement else body["status"]) == 408  # type: ignore[index]


def test_bodies_held_at_once_stay_within_the_buffer(server: ServerProcess) -> None:
    """With room for 12 MB of bodies, three 3.9 MB bodies in progress are taken and the fourth is refused (503)
    before its body is read; once one of them ends, a new one is taken again."""
    socks = []
    try:
        for _ in range(3):
            sock = _connect(server)
            socks.append(sock)
            sock.sendall(_head("POST", "/v1/select_destinations", 3_900_000) + b" " * 65536)
        time.sleep(0.5)
        with _connect(server) as sock:
            sock.sendall(_head("POST", "/v1/select_destinations", 3_900_000))
            answer = _read_all(sock)
        assert _status(answer) == 503, answer[:300]
        socks.pop().close()
        time.sleep(0.5)
        response = httpx.post(f"{server.url}/v1/select_destinations", timeout=10,
                              headers={**AUTH, "content-type": "application/json"},
                              content=json.dumps({"flavor": {"vcpus": 1, "memory_mb": 1, "root_gb": 1},
                                                  "instance_uuids": ["vm-buffer"], "pad": " " * 3_000_000}))
        assert response.status_code == 400, response.text  # read and refused for its unknown field, not a 503
    finally:
        for sock in socks:
            sock.close()


# ------------------------------------------------------------------------------------------ disconnects


@pytest.mark.parametrize(("path", "placement"), [("/v1/aggregates/1", False), ("/v1/resource-stats", False),
                                                 ("/placement/resource_providers", True)])
def test_a_client_hanging_up_mid_body_is_a_disconnect_not_a_bug(server: ServerProcess, path: str,
                                                                placement: bool) -> None:
    method = "PUT" if path == "/v1/aggregates/1" else "POST"
    unhandled = _metric(server, "gantt_http_unhandled_total")
    disconnects = _metric(server, "gantt_http_client_disconnects_total")
    log_lines = len(server.log_tail(100000).splitlines())
    for _ in range(3):
        with _connect(server) as sock:
            sock.sendall(_head(method, path, 10_000, placement=placement) + b'{"name": "')
            time.sleep(0.2)
    time.sleep(0.5)
    assert _metric(server, "gantt_http_unhandled_total") == unhandled
    assert _metric(server, "gantt_http_client_disconnects_total") == disconnects + 3
    new = server.log_tail(100000).splitlines()[log_lines:]
    assert not any("Traceback" in line for line in new), "\n".join(new)


# ------------------------------------------------------------------------------------- cpu_info as text


def test_cpu_info_text_nested_too_deep_is_refused_and_decisions_go_on(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        assert http.post("/v1/resource-stats", json={"name": "ok-node", "stats": host_stats(
            cpu_info=json.dumps({"arch": "x86_64", "maxphysaddr": {"bits": 46}}))}).status_code == 200
        deep = "[" * 20_000 + "]" * 20_000  # 39 KB: within the text's size bound
        refused = http.post("/v1/resource-stats", json={"name": "deep-node", "stats": host_stats(cpu_info=deep)})
        assert refused.status_code == 400, refused.text
        assert refused.json()["field"] == "$.stats.cpu_info" and "cpu_info" in refused.json()["detail"]
        assert http.get("/v1/hosts/deep-node").status_code == 404  # nothing written
        for spec in ({"capabilities:cpu_info:arch": "x86_64"}, {"hw:maxphysaddr_bits": "40"}):
            placed = http.post("/v1/select_destinations", json={
                "flavor": {"vcpus": 1, "memory_mb": 1, "root_gb": 1, "extra_specs": spec}})
            assert placed.status_code == 200, placed.text
            assert placed.json()["selections"][0][0]["host"] == "ok-node"


def test_a_deep_json_string_in_stats_fails_no_decision(server: ServerProcess) -> None:
    """A stats value that is JSON text nested past the interpreter's limit: a capability read into it finds
    nothing there (as for text that is no JSON), where it raised RecursionError, a 500 per decision."""
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        deep = "[" * 20_000 + "]" * 20_000
        assert http.post("/v1/resource-stats", json={"name": "stats-node", "stats": host_stats(
            stats={"blob": deep})}).status_code == 200
        placed = http.post("/v1/select_destinations", json={
            "flavor": {"vcpus": 1, "memory_mb": 1, "root_gb": 1, "extra_specs": {"capabilities:blob:x": "1"}}})
        assert placed.status_code in (200, 409), placed.text
        http.delete("/v1/hosts/stats-node")
