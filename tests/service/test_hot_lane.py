"""The hot lane (service.protocol.HotCycle, service.app.Lane): a real ``gantt serve`` answers host reports,
placements and releases from its HTTP protocol, and those answers are the ASGI path's, byte for byte but for the
request's own ids and the date.

Two servers with the same configuration, each on its own SQLite file, get the same requests in the same order:
one as plain requests (the lane), the other with chunked bodies, which the lane leaves to the ASGI app. Then what
the lane must keep of HTTP/1.1: pipelined requests answered in order, a client's ``Connection: close``, a body
arriving after its head, and the token.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gantt.service.protocol import send
from tests.conftest import host_stats
from tests.service.server import ServerProcess

TOKEN = "lane-token"
FLAVOR = {"name": "m1.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
CONFIG = {"gantt": {"max_body_bytes": 64 * 1024, "seed": 3}}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}

# (method, target, body, headers, goes to the lane when sent plain)
REQUESTS: list[tuple[str, str, Any, dict[str, str], bool]] = [
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": host_stats()}, JSON, True),
    ("POST", "/v1/resource-stats", {"name": ["h2", "h2-node"], "stats": host_stats(vcpus=4)}, JSON, True),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": host_stats()}, JSON, True),  # a repeat: in memory
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {"vcpus_used": "many"}}, JSON, True),
    ("POST", "/v1/resource-stats", {"name": ["a", "b", "c"], "stats": {}}, JSON, True),
    ("POST", "/v1/resource-stats", b"{not json", JSON, True),
    ("POST", "/v1/resource-stats", b'{"name": "h1", "stats": {}}', {**AUTH, "Content-Type": "text/plain"}, True),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {"x": "y" * 70_000}}, JSON, False),  # over the limit
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {}}, {"Content-Type": "application/json"}, True),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {}}, {**JSON, "Authorization": "Bearer nope"}, True),
    ("POST", "/v1/resource-stats?node=h1", {"name": "h1", "stats": {}}, JSON, False),
    ("POST", "/v1/resource-stats", {"name": "h1", "stats": {}}, {**JSON, "Content-Encoding": "gzip"}, True),
    ("POST", "/v1/select_destinations", {"flavor": FLAVOR, "instance_uuids": ["i-1"]}, JSON, True),
    ("POST", "/v1/select_destinations", {"flavor": FLAVOR, "instance_uuids": ["i-2", "i-3"]}, JSON, True),
    ("POST", "/v1/select_destinations", {"flavor": {**FLAVOR, "vcpus": -1}}, JSON, True),
    ("POST", "/v1/select_destinations", {"flavor": {**FLAVOR, "vcpus": 1000}}, JSON, True),
    ("POST", "/v1/select_destinations", {"flavour": FLAVOR}, JSON, True),
    ("POST", "/v1/select_destinations", None, JSON, True),
    ("DELETE", "/v1/allocations/i-1", None, AUTH, True),
    ("DELETE", "/v1/allocations/i-1", None, AUTH, True),
    ("DELETE", "/v1/allocations/i-2", None, {}, True),
    ("DELETE", "/v1/allocations/" + "x" * 300, None, AUTH, True),
    ("DELETE", "/v1/allocations/i%2D2", None, AUTH, False),
    ("DELETE", "/v1/allocations/i-2?force=1", None, AUTH, False),
    ("DELETE", "/v1/allocations/i-2/more", None, AUTH, False),
    ("GET", "/v1/allocations/i-3", None, AUTH, False),
]


def _body(body: Any) -> bytes:
    return b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()


def _request(method: str, target: str, body: bytes, headers: dict[str, str], chunked: bool = False,
             close: bool = False) -> bytes:
    head = [f"{method} {target} HTTP/1.1", "Host: gantt"] + [f"{k}: {v}" for k, v in headers.items()]
    if close:
        head.append("Connection: close")
    if chunked:
        head.append("Transfer-Encoding: chunked")
        payload = (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
    else:
        if body or method == "POST":
            head.append(f"Content-Length: {len(body)}")
        payload = body
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


class _Reader:
    """Answers read off one connection, one after another (Content-Length framed, or up to the close)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _more(self) -> bytes:
        data = self.sock.recv(65536)
        self.buffer += data
        return data

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not self._more():
                raise ConnectionError("closed before an answer")
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), value.strip())
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            if not self._more():
                raise ConnectionError("closed inside an answer")
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        self.sock.settimeout(5)
        return self.buffer == b"" and self._more() == b""


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    pair = []
    try:
        for name in ("lane", "asgi"):
            pair.append(ServerProcess(f"sqlite:///{tmp_path}/{name}.sqlite", config=CONFIG, token=TOKEN).start())
        yield pair[0], pair[1]
    finally:
        for server in pair:
            server.stop()


def _connect(server: ServerProcess) -> tuple[socket.socket, _Reader]:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock, _Reader(sock)


def _lane_count(server: ServerProcess) -> int:
    sock, reader = _connect(server)
    with sock:
        sock.sendall(_request("GET", "/metrics", b"", AUTH))
        status, _, body = reader.answer()
    assert status == 200
    [count] = re.findall(rb"^gantt_http_hot_lane_total\{[^}]*\} (\d+)$", body, re.M)
    return int(count)


def _comparable(status: int, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
    # A placement names a consumer and a time of its own, every answer its request: the rest must be the same.
    body = re.sub(rb'"(consumer_uuid|created_at)":"[^"]*"', rb'"\1":"-"', body)
    body = re.sub(rb"req-[0-9a-f-]{36}", b"req-", body)
    kept = {name: value for name, value in headers.items() if name not in ("date", "x-openstack-request-id")}
    if status == 401:
        # The lane refuses a tokenless request from its head and closes the connection, its body unread; the
        # ASGI path (a chunked body) reads and drops the body and goes on: the same answer, another ending.
        kept.pop("connection", None)
    return status, kept, body


def test_the_lane_answers_as_the_asgi_path_does(servers: tuple[ServerProcess, ServerProcess]) -> None:
    lane, asgi = servers
    lane_sock, lane_reader = _connect(lane)
    asgi_sock, asgi_reader = _connect(asgi)
    try:
        for method, target, body, headers, hot in REQUESTS:
            payload = _body(body)
            lane_sock.sendall(_request(method, target, payload, headers))
            asgi_sock.sendall(_request(method, target, payload, headers, chunked=True))
            mine, theirs = lane_reader.answer(), asgi_reader.answer()
            assert mine[1]["x-openstack-request-id"].startswith("req-")
            if hot:
                assert _comparable(*mine) == _comparable(*theirs), (method, target)
            else:  # a refusal may word the body's framing (length, chunks) apart
                assert mine[0] == theirs[0], (method, target)
            # A refusal before the body is read (its size, its token) ends the connection: go on with a new one.
            if mine[1].get("connection") == "close":
                lane_sock.close()
                lane_sock, lane_reader = _connect(lane)
            if theirs[1].get("connection") == "close":
                asgi_sock.close()
                asgi_sock, asgi_reader = _connect(asgi)
    finally:
        lane_sock.close()
        asgi_sock.close()
    assert [s for *_, s in REQUESTS].count(True) == _lane_count(lane)
    assert _lane_count(asgi) == 0


def test_pipelined_requests_are_answered_in_order(servers: tuple[ServerProcess, ServerProcess]) -> None:
    lane = servers[0]
    sock, reader = _connect(lane)
    report = _request("POST", "/v1/resource-stats", _body({"name": "h1", "stats": host_stats()}), JSON)
    place = _request("POST", "/v1/select_destinations",
                     _body({"flavor": FLAVOR, "instance_uuids": ["p-1"]}), JSON)
    with sock:
        # hot, not hot, hot, not hot, hot: one write, so the second head arrives while the first is answered
        sock.sendall(report + _request("GET", "/v1/hosts/h1", b"", AUTH) + place
                     + _request("GET", "/v1/allocations/p-1", b"", AUTH)
                     + _request("DELETE", "/v1/allocations/p-1", b"", AUTH))
        answers = [reader.answer() for _ in range(5)]
    assert [status for status, _, _ in answers] == [200, 200, 200, 200, 204]
    assert json.loads(answers[1][2])["host"] == "h1"
    [[chosen]] = json.loads(answers[2][2])["selections"]
    assert json.loads(answers[3][2])["host"] == chosen["host"]  # asked after the placement, answered after it
    assert len({headers["x-openstack-request-id"] for _, headers, _ in answers}) == 5


def test_a_client_that_asks_to_close_is_answered_then_closed(servers: tuple[ServerProcess, ServerProcess]) -> None:
    sock, reader = _connect(servers[0])
    with sock:
        sock.sendall(_request("POST", "/v1/resource-stats", _body({"name": "h9", "stats": host_stats()}), JSON,
                              close=True))
        status, headers, _ = reader.answer()
        assert (status, headers["connection"]) == (200, "close")
        assert reader.closed()


def test_a_body_that_arrives_after_its_head_is_waited_for(servers: tuple[ServerProcess, ServerProcess]) -> None:
    lane = servers[0]
    sock, reader = _connect(lane)
    before = _lane_count(lane)
    request = _request("POST", "/v1/resource-stats", _body({"name": "h7", "stats": host_stats()}), JSON)
    head, body = request.split(b"\r\n\r\n", 1)
    with sock:
        sock.sendall(head + b"\r\n\r\n")
        time.sleep(0.2)
        sock.sendall(body[:10])
        time.sleep(0.2)
        sock.sendall(body[10:])
        status, _, answer = reader.answer()
        assert status == 200, answer
        sock.sendall(_request("GET", "/v1/hosts/h7", b"", AUTH))  # the connection goes on
        assert reader.answer()[0] == 200
    assert _lane_count(lane) == before + 1


def test_answers_the_socket_cannot_take_at_once_follow_in_order(tmp_path: Path) -> None:
    """A client that pipelines big placements and reads nothing until it has sent them all: the answers fill the
    socket, the rest waits in the transport, and every answer arrives whole and in order."""
    with ServerProcess(f"sqlite:///{tmp_path}/big.sqlite", config=CONFIG, token=TOKEN) as server:
        sock, reader = _connect(server)
        with sock:
            sock.sendall(_request("POST", "/v1/resource-stats/batch", _body(
                {"reports": [{"name": f"big-{i}", "stats": host_stats(vcpus=100_000, memory_mb=10 ** 8,
                                                                      local_gb=10 ** 6)}
                             for i in range(4)]}), JSON))
            assert reader.answer()[0] == 200
            requests = [_request("POST", "/v1/select_destinations", _body(
                {"flavor": FLAVOR, "num_instances": 200,
                 "instance_uuids": [f"c-{n}-{i}" for i in range(200)]}), JSON) for n in range(60)]
            sock.sendall(b"".join(requests))
            time.sleep(1.0)  # answers pile up unread
            answers = [reader.answer() for _ in requests]
        assert [status for status, _, _ in answers] == [200] * len(requests)
        for n, (_, _, body) in enumerate(answers):
            selections = json.loads(body)["selections"]
            assert [s[0]["consumer_uuid"] for s in selections] == [f"c-{n}-{i}" for i in range(200)]
        # The first went through the lane; those read behind it while it was answered waited in uvicorn's
        # pipeline, which the ASGI path serves (the batch report is no hot route).
        assert _lane_count(server) == 1


class _Transport:
    """What ``send`` needs of a transport: its unsent bytes, kept in order."""

    def __init__(self) -> None:
        self.held = b""

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return len(self.held)

    def write(self, data: bytes) -> None:
        self.held += data


def test_send_gives_the_transport_what_the_socket_does_not_take() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        transport = _Transport()
        chunks = [bytes([n]) * 100_000 for n in range(1, 60)]  # more than the pair's buffers hold
        for chunk in chunks:
            send(ours.fileno(), transport, chunk)  # type: ignore[arg-type]
        assert transport.held  # the socket filled up; the rest waits in order
        received = b""
        theirs.settimeout(5)
        while len(received) < sum(map(len, chunks)) - len(transport.held):
            received += theirs.recv(1 << 20)
        assert received + transport.held == b"".join(chunks)
        send(-1, transport, b"tail")  # no socket: the transport alone
        assert transport.held.endswith(b"tail")
