"""Runs under the reference virtualenv (gabbi), never imports gantt: ``gabbi-run`` with one change to its HTTP
client, so that every request of a gabbi file reaches the server as the file spells it.

gabbi 4 sends through httpx, whose HTTP/1.1 layer (h11) refuses to put on the wire a request it judges malformed
(``content-length: hi mom`` in basic-http.yaml: ``LocalProtocolError: bad Content-Length``): the test then fails
in the client, and the server it means to test is never asked. Here such a request, and only one h11 refused to
send, is written as raw bytes on a socket instead (request line, the test's headers as given, its body), with
``connection: close``, and the answer is read by the standard library's HTTP/1.1 response parser and handed back
to gabbi as httpx's would be (headers, status, reason, body). Any other request goes through httpx unchanged.

argv: as ``gabbi-run``'s (the server's URL; the YAML on stdin).
"""

from __future__ import annotations

import http.client
import socket
import sys
import urllib.parse
from typing import Any

import httpx
from gabbi import httpclient
from gabbi.runner import run

_request = httpclient.Http.request


def _raw(url: str, method: str, body: Any, headers: dict[str, str], timeout: float) -> tuple[httpx.Headers, bytes]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"raw requests are sent over plain HTTP only, not {parts.scheme}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    given = {name.lower() for name in headers}
    head = [f"{method} {target} HTTP/1.1", f"host: {parts.netloc}"]
    head += [f"{name}: {value}" for name, value in (("accept", "*/*"), ("connection", "close"))
             if name not in given]
    head += [f"{name}: {value}" for name, value in headers.items()]
    data = body.encode() if isinstance(body, str) else (body or b"")
    with socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout) as sock:
        sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + data)
        answer = http.client.HTTPResponse(sock, method=method)
        answer.begin()
        content = answer.read()
        version = {10: "HTTP/1.0", 11: "HTTP/1.1"}.get(answer.version, f"HTTP/{answer.version}")
        out = httpx.Headers(answer.getheaders())
        out["status"], out["reason"], out["http_protocol_version"] = str(answer.status), answer.reason, version
        return out, content


def request(self: httpclient.Http, absolute_uri: str, method: str, body: Any, headers: dict[str, str],
            redirect: bool, timeout: float) -> tuple[Any, bytes]:
    try:
        return _request(self, absolute_uri, method, body, headers, redirect, timeout)
    except httpx.LocalProtocolError:  # refused by the client before a byte was sent: send it as it is
        return _raw(absolute_uri, method, body, headers, timeout)


httpclient.Http.request = request  # VerboseHttp's calls this one too

if __name__ == "__main__":
    sys.argv[0] = "gabbi-run"
    sys.exit(run())
