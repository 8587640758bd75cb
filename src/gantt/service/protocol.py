"""uvicorn's httptools protocol with the limits a service facing untrusted clients needs.

Before these, a 200 MB header without a token was read in full (and held in memory) before the 401, a client
that sent half a request line and waited kept its connection forever, and parser errors were answered in
``text/plain``. Here: the request head (request line and headers) is at most ``MAX_HEAD_BYTES`` and
``MAX_HEADERS`` headers, and must arrive within ``HEAD_TIMEOUT`` seconds of the connection (or of the end of the
previous response); past a limit the answer is a problem+json 431 (or 408) and the connection is closed, before any
more is read. Idle keep-alive connections are closed by uvicorn's ``timeout_keep_alive``. A request the parser
refuses (a Content-Length that is no count of bytes, Content-Length beside Transfer-Encoding ...) is answered with
a 400 naming the header, and the connection closed: its body's end is unknown. Such refusals of a request for the
Placement face are in Placement's error body (``REFUSAL``), which its clients read.

The body has limits of its own, for every path alike (``/v1``, the Placement face, named namespaces): a declared
Content-Length above ``MAX_BODY`` is a 413 before a byte of the body is read (a chunked body is cut when it passes
it); the whole body must arrive within ``BODY_TIMEOUT`` seconds of its head; and the bodies a worker holds at once,
over all its connections, stay within ``BUFFER`` (past it: 503, before reading). A hot route's token is checked
from the head (``Lane.refuse``): a client without one is answered 401 and cut off before it sends its body. Before
these, 80 tokenless connections each sending 3.9 MB to a hot route and stalling held 211-310 MB, one for 150 s;
and a 100 MB body for the Placement face was read whole before its 400.

With ``--workers N`` the workers also keep their shares of the keep-alive connections even
(``gantt.service.connections.Spread``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import re
import sys
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, cast

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from gantt.base.ids import request_id as new_request_id
from gantt.service.connections import Budget, Spread

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
HEAD_TIMEOUT = 10.0
BODY_TIMEOUT = 10.0  # seconds from the end of a request's head to the end of its body
# Seconds, and bytes, a refused connection is still read (what comes dropped) after its answer and our FIN, before
# it is closed: closed at once with the client's body unread, the kernel answers that body with a reset, which may
# destroy the refusal before the client reads it. Bounded in bytes too: a refusal stops the reading of a body.
LINGER = 2.0
LINGER_BYTES = 256 * 1024
# Set by gantt.service.server: [gantt] max_body_bytes (None: no limit here, the app's own applies).
MAX_BODY: int | None = None

Headers = list[tuple[bytes, bytes]]
# Set by gantt.service.server: the answer (status, headers, body) to a refused request for a path of a face with an
# error format of its own (the Placement face's, under its mount), or None where Gantt's problem+json is it.
REFUSAL: Callable[[str, int, str, Headers], tuple[int, Headers, bytes] | None] | None = None


def refusal(status: int, detail: str, target: bytes = b"", headers: Headers | None = None,
            field: str | None = None) -> bytes:
    """The whole answer to a request refused before any app saw it, for its ``target`` (the request line's, as
    far as it was read) and its ``headers`` (as far as they were read)."""
    made = None
    if REFUSAL is not None:
        path = _path(target)
        if path is not None:
            try:
                made = REFUSAL(path, status, detail, headers or [])
            except Exception:  # raised on from the parser's callback, it would cut the connection unanswered
                log.exception("the refusal of a request for %s failed; answered in problem+json", path)
    if made is None:
        problem = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status, "detail": detail}
        if field is not None:
            problem["field"] = field
        # Named like every answer of the app (service.guard: OpenStack's x-openstack-request-id), so that the
        # client's log line and ours can be matched for a refusal too.
        made = status, [(b"content-type", b"application/problem+json"),
                        (b"x-openstack-request-id", new_request_id().encode())], json.dumps(problem).encode()
    status, head, body = made
    return b"".join([b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode()),
                     *(b"%s: %s\r\n" % header for header in head),
                     b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body), body])


def _path(target: bytes) -> str | None:
    if not target:
        return None
    try:
        return urllib.parse.unquote(httptools.parse_url(target).path.decode("ascii"))
    except (httptools.HttpParserInvalidURLError, UnicodeDecodeError):
        return None


# llhttp's reasons for refusing a request's framing, as the header at fault and what it must be. Placement's own
# words for a Content-Length that is no integer (its clients, and its functional tests, look for them).
_FRAMING = {"Invalid character in Content-Length": ("content-length", "content-length header must be an integer"),
            "Content-Length overflow": ("content-length", "content-length header must be an integer"),
            "Duplicate Content-Length": ("content-length", "content-length header must be given once"),
            "Transfer-Encoding can't be present with Content-Length":
                ("transfer-encoding", "content-length and transfer-encoding headers must not both be given"),
            "Content-Length can't be present with Transfer-Encoding":
                ("transfer-encoding", "content-length and transfer-encoding headers must not both be given"),
            "Request has invalid `Transfer-Encoding`":
                ("transfer-encoding", "transfer-encoding header must end with chunked")}
_HEADER_LINE = re.compile(rb"\r\n([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n]*)")


# Set by gantt.service.server (``[tuning] body_buffer_bytes``); None: bodies are not counted across connections.
BUFFER: Budget | None = None


# Set by gantt.service.server in a worker of several; None in a single process (nothing to spread).
SPREAD: Spread | None = None
# Set by gantt.service.server: the served app's hot lane (``gantt.service.hot.Lane``), or None where there is none.
LANE: Any = None


class _NoEvent:
    """What uvicorn's protocol sets on a cycle when body or disconnection arrives: a hot cycle waits on nothing."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_EVENT = _NoEvent()


class HotCycle:
    """One request for a hot route (``LANE``), read whole and then answered by one task in one write. It stands
    where uvicorn's protocol keeps its cycle (``cycle``), with the fields the protocol reads and sets there (body,
    completion, keep-alive, disconnection), so that pipelining, shutdown and lost connections work as for any
    other request: a request arriving behind it waits in uvicorn's pipeline until its answer is out."""

    __slots__ = ("body", "disconnected", "keep_alive", "message_event", "more_body", "protocol", "response_complete",
                 "scope", "started")

    def __init__(self, protocol: BoundedHttpToolsProtocol, scope: dict[str, Any], keep_alive: bool) -> None:
        self.protocol = protocol
        self.scope = scope
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.more_body = True
        self.started = False
        self.response_complete = False
        self.disconnected = False
        self.message_event = _NO_EVENT

    async def run(self) -> None:
        response, request_id = await LANE.answer(self.scope, bytes(self.body))
        protocol = self.protocol
        if protocol.flow.write_paused and not self.disconnected:
            await protocol.flow.drain()  # a client that does not read its answers is not written more
        if self.disconnected:
            return
        data, self.keep_alive = answer_bytes(protocol, response, request_id, self.keep_alive)
        protocol.send(data)
        self.response_complete = True
        if not self.keep_alive:
            protocol.transport.close()
        protocol.on_response_complete()


def answer_bytes(protocol: HttpToolsProtocol, response: Any, request_id: str, keep_alive: bool) -> tuple[bytes, bool]:
    """A lane's whole answer on the wire, and whether the connection stays open after it."""
    head = [STATUS_LINE[response.status_code]]
    for name, value in (*protocol.server_state.default_headers, *response.raw_headers,
                        (b"x-openstack-request-id", request_id.encode())):
        if name == b"connection" and b"close" in value.lower():
            keep_alive = False
        head += (name, b": ", value, b"\r\n")
    if not keep_alive:
        head.append(b"connection: close\r\n")
    head += (b"\r\n", response.body)
    return b"".join(head), keep_alive


class _OneWrite:
    """The transport as one response cycle sees it: the answer's head (status line and headers) is held until
    the body's first write and goes out with it, one send instead of two. Each send on loopback runs the
    client's receive path and may wake it; profiled per Placement write, the head's send alone was a fifth of
    the event loop's time. A head whose body does not follow in the same step (a streamed answer) goes out at
    the loop's next turn; a 100 Continue is never held (it is written before the response starts)."""

    __slots__ = ("_cycle", "_head_sent", "_held", "_loop", "_send", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: Any, loop: asyncio.AbstractEventLoop,
                 send: Callable[[bytes], None]) -> None:
        self._transport = transport
        self._send = send  # the protocol's (``BoundedHttpToolsProtocol.send``)
        self._cycle = cycle
        self._loop = loop
        self._held: bytes | None = None
        self._head_sent = False

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if len(data) < 65536:
                self._send(held + data)
            else:  # a large body is not copied to put the head in front of it
                self._transport.writelines([held, data])
        elif not self._head_sent and self._cycle.response_started:
            self._head_sent = True
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def send(fd: int, transport: asyncio.WriteTransport, data: bytes) -> None:
    """``data`` out on ``transport``: what the socket ``fd`` (non-blocking, the transport's) takes now, written
    there with the interpreter lock released, and the rest given to the transport, which sends it in order when
    the socket can take more. While the transport still holds unsent bytes, all goes to it (they are first).
    ``fd`` < 0: the transport alone."""
    sent = 0
    if fd >= 0 and not transport.is_closing() and transport.get_write_buffer_size() == 0:
        try:
            sent = os.write(fd, data)
        except OSError:  # full (EAGAIN), interrupted or broken: the transport tries, and reports a broken one
            sent = 0
    if sent < len(data):
        transport.write(data[sent:] if sent else data)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._header_count = 0
        self._in_head = True
        self._head_timer: asyncio.TimerHandle | None = None
        self._rejected = False
        self._tail = b""  # the last bytes of the previous read: the blank line may straddle two reads
        self._head_read = b""
        self._spread = SPREAD
        self._leaving = False
        self._fd = -1  # the connection's socket (``send``)
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_size = 0  # of the request being read
        self._chunked = False
        self._held: collections.deque[int] = collections.deque()  # taken of BUFFER, per request not yet answered
        self._current: Any = None  # the cycle of the request being read, once its head is
        self._dropped = 0  # bytes read after a refusal (``_linger``)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # asyncio types it BaseTransport; ours is a Transport
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        # never past a TLS layer (gantt serve has none; an embedder's uvicorn might)
        self._fd = sock.fileno() if sock is not None and transport.get_extra_info("sslcontext") is None else -1
        self._arm()
        if self._spread is not None:
            self._spread.opened()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_body()
        self._give_back(len(self._held))
        cycle = self._current
        if type(cycle) is HotCycle and cycle.more_body and not self._rejected and LANE is not None:
            # gone before its body was whole (the app path counts its own: Guard): a client's doing, no answer
            LANE.guard.service.metrics.client_disconnects += 1
        if self._spread is not None:
            self._spread.closed(self._leaving)
            self._spread = None  # counted once, whatever follows
        super().connection_lost(exc)

    def send(self, data: bytes) -> None:
        """``data`` out on the connection: straight to its socket while the transport holds nothing unsent, with
        the interpreter lock released (uvloop's own write holds it through the send, and on loopback a send runs
        the receiver's network path too: a third of the event loop's time per host report, profiled, in which
        the worker's decider, writer and feed threads could not run); what the socket does not take goes to the
        transport, which sends it in order when the socket can take more."""
        send(self._fd, self.transport, data)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        if self._in_head and not self.transport.is_closing():
            self._reject(408, f"the request head did not arrive within {HEAD_TIMEOUT:g} s")

    def _arm_body(self) -> None:
        self._disarm_body()
        self._body_timer = self.loop.call_later(BODY_TIMEOUT, self._body_too_slow)

    def _disarm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self._rejected or self.transport.is_closing():
            return
        if self.flow.read_paused:  # the app is not reading (a busy handler): not the client's delay
            self._arm_body()
            return
        self._reject(408, f"the request body did not arrive within {BODY_TIMEOUT:g} s of its head")

    def _hold(self, size: int) -> bool:
        """``size`` bytes of body taken of BUFFER for the request whose head was just read (False: refused)."""
        if BUFFER is not None and not BUFFER.take(size):
            self._reject(503, "the server holds as many request bodies as it takes at once; try again shortly")
            return False
        self._held.append(size if BUFFER is not None else 0)
        return True

    def _give_back(self, requests: int) -> None:
        for _ in range(min(requests, len(self._held))):
            size = self._held.popleft()
            if BUFFER is not None:
                BUFFER.give(size)

    def _reject(self, status: int, detail: str, field: str | None = None, target: bytes | None = None) -> None:
        """Answer ``status`` (unless the request's answer has begun) and close the connection: its body, if any,
        is not read. A request the app is reading sees its client gone."""
        self._disarm()
        self._disarm_body()
        if self._rejected or self.transport.is_closing():
            return
        self._rejected = True
        cycle = self._current
        answering = cycle is not None and (getattr(cycle, "response_started", False) or cycle.response_complete)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive answers "disconnected" and its answer is dropped
            cycle.message_event.set()
        if not answering:
            url = getattr(self, "url", b"") if target is None else target
            self.transport.write(refusal(status, detail, url, self._refused_headers(url), field))
        self._linger()

    def _linger(self) -> None:
        """End a refused connection: our side now (the client reads its answer, then the end), theirs within
        LINGER seconds, what they send meanwhile read and dropped (``data_received``)."""
        transport = self.transport
        if transport.is_closing():
            return
        try:
            if transport.can_write_eof():
                transport.write_eof()
                self.loop.call_later(LINGER, transport.close)
                return
        except (OSError, RuntimeError):
            pass
        transport.close()

    def _refused_headers(self, url: bytes) -> Headers:
        """The refused request's headers: those parsed, or, when the parser stopped inside a head that came in one
        read, all of that head's. The parser hands over none past the one it stopped at, and a version header
        after a bad Content-Length still says in which version the Placement face answers."""
        parsed = self.headers or []
        # The last request line in the read: the parser stops at the request it refuses.
        start = self._head_read.rfind(b" " + url + b" HTTP/") if self._in_head and url else -1
        if start < 0:
            return parsed
        end = self._head_read.find(b"\r\n\r\n", start)
        head = self._head_read[start:end if end >= 0 else None]
        return [(name.lower(), value.rstrip()) for name, value in _HEADER_LINE.findall(head)]

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self.transport.close()
            return
        if self._in_head:
            # Count the head only: a read often carries the head and the start of the body together, and a big
            # body is the body limit's business (413), not the head's.
            window = self._tail + data[:MAX_HEAD_BYTES + 65536]
            end = window.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
            self._tail = data[-3:]
            self._head_read = data  # what a refusal reads the head's headers from (see _refused_headers)
            if self._head_bytes > MAX_HEAD_BYTES + 65536:  # far past the limit in one read: stop reading now
                self._reject(431, f"the request head is larger than {MAX_HEAD_BYTES} bytes")
                return
        super().data_received(data)

    def on_message_begin(self) -> None:
        self._current = None
        self._in_head = True
        self._head_bytes = 0
        self._tail = b""
        self._header_count = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        if self._rejected:
            return
        if len(self.url) + len(url) > MAX_HEAD_BYTES:
            # the path's start says which face answers (the Placement face's error body under its mount)
            self._reject(431, f"the request line is longer than {MAX_HEAD_BYTES} bytes",
                         target=(self.url + url)[:4096])
            self.parser.pause()  # type: ignore[attr-defined]  # llhttp's pause: httptools has it, its stub not
            return
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._rejected:
            return
        self._header_count += 1
        if self._header_count > MAX_HEADERS or self._head_bytes > MAX_HEAD_BYTES:
            self._reject(431, f"at most {MAX_HEADERS} headers and {MAX_HEAD_BYTES} bytes of request head")
            self.parser.pause()  # type: ignore[attr-defined]  # llhttp's pause: httptools has it, its stub not
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._rejected:
            return
        self._in_head = False
        self._disarm()
        length, self._chunked = self._framing()
        self._body_size = 0
        if MAX_BODY is not None and length > MAX_BODY:
            self._reject(413, f"the request body of {length} bytes is larger than the limit of {MAX_BODY} bytes",
                         "content-length")
            return
        existing = self.cycle
        if (existing is None or existing.response_complete) and self._hot():
            if self._rejected or not self._hold(length):  # refused from its head (no token), or no room
                return
            self._current = self.cycle
            self._spread_out()
            if length:
                self._arm_body()
            return
        if not self._hold(length):
            return
        super().on_headers_complete()
        self._spread_out()
        cycle = self.cycle
        if cycle is not None and cycle is not existing:  # its task has not run yet: nothing is written
            cycle.transport = _OneWrite(self.transport, cycle, self.loop, self.send)  # type: ignore[assignment]  # a stand-in transport
            self._current = cycle
        if length or self._chunked:
            self._arm_body()

    def _framing(self) -> tuple[int, bool]:
        """The request's declared body length (0 if none) and whether it is chunked (the parser has checked both
        headers: a Content-Length is digits, and not beside Transfer-Encoding)."""
        length, chunked = 0, False
        for name, value in self.headers:
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = True
        return length, chunked

    def _spread_out(self) -> None:
        spread = self._spread
        if spread is not None and not self._leaving and not self.pipeline and self.cycle is not None \
                and self.cycle.keep_alive and spread.should_leave():
            # This answer carries "Connection: close" and the connection ends after it (uvicorn's own keep-alive
            # decision, as for a client that asked for close): the client reconnects, maybe to another worker.
            self._leaving = True
            self.cycle.keep_alive = False

    def _hot(self) -> bool:
        """Whether this request goes to the hot lane (``LANE``), as a ``HotCycle``: a hot route's plain path over
        HTTP/1.1 whose body, if any, is announced by a Content-Length within the service's body limit. Anything
        else (chunked, 100-continue, an upgrade, a body too big: their answers are the ASGI path's) is not."""
        lane = LANE
        if lane is None or self.expect_100_continue or self.parser.get_http_version() != "1.1" \
                or self.parser.should_upgrade() or self.limit_concurrency is not None:
            return False
        method = self.parser.get_method()
        found = lane.route(method, self.url)
        if found is None:
            return False
        for name, value in self.headers:
            if name == b"transfer-encoding" or (name == b"content-length" and int(value) > lane.max_body):
                return False
        route, params = found
        path = self.url.decode("ascii")
        # uvicorn's scope, with the keys Starlette's router would add (route, path_params): a plain dict here
        scope = cast(dict[str, Any], self.scope)
        scope.update(method=method.decode("ascii"), path=path, raw_path=self.url, query_string=b"", route=route,
                     path_params=params)
        refused = lane.refuse(scope)
        if refused is not None:
            # No token: answered from the head, the body never read, the connection closed (its unread body
            # would otherwise have to be read through to find the next request).
            self._disarm()
            self._rejected = True
            response, request_id = refused
            data, _ = answer_bytes(self, response, request_id, keep_alive=False)
            self.send(data)
            self._linger()
            return True
        self.cycle = HotCycle(self, scope, self.parser.should_keep_alive())  # type: ignore[assignment]  # in the cycle's place
        return True

    def on_body(self, body: bytes) -> None:
        if self._rejected:
            return
        cycle: Any = self.cycle  # uvicorn's cycle, or a HotCycle in its place
        if type(cycle) is HotCycle:
            cycle.body += body  # within the body limit: _hot saw its Content-Length
            return
        if self._chunked:  # no length declared: counted as it comes
            self._body_size += len(body)
            if MAX_BODY is not None and self._body_size > MAX_BODY:
                self._reject(413, f"the request body is larger than the limit of {MAX_BODY} bytes")
                return
            if cycle is not None and not cycle.response_complete and self._held:  # held by the app, not dropped
                if BUFFER is not None and not BUFFER.take(len(body)):
                    self._reject(503, "the server holds as many request bodies as it takes at once; try again "
                                      "shortly")
                    return
                self._held[-1] += len(body) if BUFFER is not None else 0
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._rejected:
            return
        self._disarm_body()
        cycle: Any = self.cycle  # uvicorn's cycle, or a HotCycle in its place
        if type(cycle) is HotCycle:
            if not cycle.started:
                cycle.started = True
                cycle.more_body = False
                task = self.loop.create_task(cycle.run())
                task.add_done_callback(self.tasks.discard)
                self.tasks.add(task)
        else:
            super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    def on_response_complete(self) -> None:
        # The next head's clock starts when the answer is out, not when the request was read: armed at the
        # request's end, a handler slower than HEAD_TIMEOUT (a commit waiting on a busy store) had its
        # connection cut by a 408 in the middle of its work.
        self._give_back(1)  # answers go out in the order their requests came
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def send_400_response(self, msg: str) -> None:
        # Called in uvicorn's handler of the parser's error, which it does not pass on: its reason is still the
        # exception being handled.
        error = sys.exc_info()[1]
        reason = str(error) if isinstance(error, httptools.HttpParserError) else ""
        field, detail = _FRAMING.get(reason, (None, f"malformed HTTP request: {reason or msg}"))
        self._reject(400, detail, field)
