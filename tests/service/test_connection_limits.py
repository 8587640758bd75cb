"""Issue 11: header size and count limits, a deadline for the request head, problem+json parser errors."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

from gantt.service.protocol import HEAD_TIMEOUT, MAX_HEAD_BYTES, MAX_HEADERS
from tests.service.server import ServerProcess


def _connect(server: ServerProcess) -> socket.socket:
    url = urlsplit(server.url)
    return socket.create_connection((url.hostname, url.port), timeout=30)


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_huge_header_is_refused_before_it_is_read(secured: ServerProcess) -> None:
    sock = _connect(secured)
    sock.sendall(b"GET /v1/hosts HTTP/1.1\r\nHost: x\r\nX-Big: ")
    sent = 0
    try:
        while sent < 50 * 1024 * 1024:  # a server reading it all would take 50 MB; this one stops early
            sock.sendall(b"a" * 65536)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = _read_all(sock)
    sock.close()
    assert sent < 50 * 1024 * 1024
    assert answer.startswith(b"HTTP/1.1 431") and b"application/problem+json" in answer


def test_too_many_headers_is_a_431(secured: ServerProcess) -> None:
    sock = _connect(secured)
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(MAX_HEADERS + 5))
    sock.sendall(b"GET /v1/hosts HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431")


def test_a_slow_request_head_times_out(secured: ServerProcess) -> None:
    sock = _connect(secured)
    sock.sendall(b"GET /v1/hos")
    started = time.monotonic()
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408")
    assert time.monotonic() - started < HEAD_TIMEOUT + 10


def test_a_malformed_request_is_a_problem_json_400(secured: ServerProcess) -> None:
    sock = _connect(secured)
    sock.sendall(b"GARBAGE\x00\x01 / HTTP/9\r\n\r\n")
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 400") and b"application/problem+json" in answer


@pytest.mark.parametrize("size", [MAX_HEAD_BYTES // 2])
def test_a_large_but_allowed_head_still_works(secured: ServerProcess, size: int) -> None:
    sock = _connect(secured)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size + b"\r\nConnection: close\r\n\r\n")
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200")
