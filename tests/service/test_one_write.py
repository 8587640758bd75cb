"""An answer's head goes out with its body in one send (service.protocol._OneWrite), and nothing is held that a
client is waiting for: a 100 Continue, a streamed answer's head, the head of an answer cut short."""

from __future__ import annotations

import asyncio
import socket

from gantt.cli.server_process import ServerProcess
from gantt.service.protocol import _OneWrite


class _Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def writelines(self, parts: list[bytes]) -> None:
        self.sent.append(b"".join(parts))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class _Cycle:
    response_started = False


def _pair() -> tuple[_Transport, _Cycle, _OneWrite, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    transport, cycle = _Transport(), _Cycle()
    return transport, cycle, _OneWrite(transport, cycle, loop, transport.write), loop  # type: ignore[arg-type]


def test_head_and_body_go_out_in_one_write() -> None:
    transport, cycle, one, loop = _pair()
    one.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # before the response starts: at once
    assert transport.sent == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    cycle.response_started = True
    one.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert len(transport.sent) == 1
    one.write(b"{}")
    assert transport.sent[1:] == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    big = b"x" * 100_000
    one.write(big)  # a later write of the same answer: as given
    assert transport.sent[2:] == [big]
    loop.run_until_complete(asyncio.sleep(0))  # the flush scheduled with the head finds nothing held
    assert len(transport.sent) == 3
    loop.close()


def test_a_head_without_its_body_goes_out_at_the_next_turn_or_on_close() -> None:
    transport, cycle, one, loop = _pair()
    cycle.response_started = True
    one.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    assert transport.sent == []
    loop.run_until_complete(asyncio.sleep(0))
    assert transport.sent == [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]
    loop.close()

    transport, cycle, one, loop = _pair()
    cycle.response_started = True
    one.write(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    one.close()
    assert transport.sent == [b"HTTP/1.1 500 Internal Server Error\r\n\r\n"] and transport.closed
    loop.close()


def test_a_live_server_answers_whole(server: ServerProcess) -> None:
    """Through the real protocol: keep-alive requests on one connection each get their whole answer."""
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        for path in (b"/health", b"/placement/", b"/health"):
            conn.sendall(b"GET " + path + b" HTTP/1.1\r\nhost: x\r\nx-auth-token: admin\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(body) < length:
                body += conn.recv(65536)
            assert head.startswith(b"HTTP/1.1 200") and len(body) == length
