"""Requests whose framing the HTTP layer refuses (a Content-Length that is no count of bytes, Content-Length beside
Transfer-Encoding, a body longer than declared ...), sent as raw bytes to a real ``gantt serve``: a 4xx at once,
never a 500 or a hang; in Placement's error body for the Placement face's paths (under its mount, ``/placement``
or the root), in Gantt's problem+json naming the header for Gantt's own."""

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

from gantt.service.protocol import HEAD_TIMEOUT
from tests.service.server import ServerProcess

BODY = b'{"uuid": "ce13d7f1-9988-4dfd-8e16-ce071802eb36"}'
REQUEST_ID = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@pytest.fixture(scope="module", params=["/placement", "/"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server with the Placement face at the mount, and the prefix of the face's paths."""
    mount = request.param
    workdir = tmp_path_factory.mktemp("framing")
    with ServerProcess(f"sqlite:///{workdir}/gantt.sqlite", workdir=workdir,
                       config={"gantt": {"placement_mount": mount}}) as server:
        yield server.url, "" if mount == "/" else mount


def send(url: str, *parts: bytes, pause: float = 0.0) -> tuple[bytes, float]:
    """What the server answers to ``parts`` (sent ``pause`` seconds apart) until it closes the connection, and
    how long that took."""
    address = urlsplit(url)
    started = time.monotonic()
    with socket.create_connection((address.hostname, address.port), timeout=HEAD_TIMEOUT + 5) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, part in enumerate(parts):
            if i:
                time.sleep(pause)
            sock.sendall(part)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks), time.monotonic() - started


def answer(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert len(body) == int(headers["content-length"]), raw
    return int(lines[0].split()[1]), headers, body


def request(path: str, *headers: str, body: bytes = BODY) -> bytes:
    head = [f"POST {path} HTTP/1.1", "host: x", "x-auth-token: admin", "content-type: application/json", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def placement_error(raw: bytes, status: int = 400) -> tuple[dict[str, str], dict[str, object]]:
    code, headers, body = answer(raw)
    assert code == status, raw
    assert headers["content-type"] == "application/json" and headers["connection"] == "close", raw
    errors = json.loads(body)["errors"]
    assert len(errors) == 1 and errors[0]["status"] == status, raw
    assert errors[0]["request_id"] == headers["x-openstack-request-id"] and errors[0]["request_id"].startswith("req-")
    return headers, errors[0]


def test_a_content_length_that_is_no_integer_is_placements_400(served: tuple[str, str]) -> None:
    url, prefix = served
    raw, took = send(url, request(f"{prefix}/resource_providers", "content-length: hi mom"))
    headers, error = placement_error(raw)
    # What Placement 16 answers (its handler's words, status and title; no code before 1.23), without the
    # boilerplate webob puts in front of every detail, as everywhere on the face.
    assert error == {"status": 400, "title": "Bad Request", "detail": "content-length header must be an integer",
                     "request_id": headers["x-openstack-request-id"]}
    assert headers["openstack-api-version"] == "placement 1.0"
    assert took < HEAD_TIMEOUT / 2


def test_the_error_code_comes_with_the_version_asked_even_after_the_bad_header(served: tuple[str, str]) -> None:
    url, prefix = served
    raw, _ = send(url, request(f"{prefix}/resource_providers", "content-length: 12x",
                               "openstack-api-version: placement 1.23"))
    headers, error = placement_error(raw)
    assert error["code"] == "placement.undefined_code" and headers["openstack-api-version"] == "placement 1.23"


def test_a_head_in_two_reads_keeps_the_version_read_before_the_refusal(served: tuple[str, str]) -> None:
    url, prefix = served
    whole = request(f"{prefix}/resource_providers", "openstack-api-version: placement latest",
                    "content-length: hi mom")
    cut = whole.index(b"content-length: hi")
    raw, _ = send(url, whole[:cut], whole[cut:], pause=0.3)
    headers, error = placement_error(raw)
    assert error["code"] == "placement.undefined_code" and headers["openstack-api-version"] != "placement 1.0"


def test_an_unacceptable_version_is_refused_first_as_the_face_does(served: tuple[str, str]) -> None:
    url, prefix = served
    raw, _ = send(url, request(f"{prefix}/resource_providers", "openstack-api-version: placement 9.99",
                               "content-length: hi mom"))
    _, error = placement_error(raw, 406)
    assert error["min_version"] == "1.0" and "9.99" in str(error["detail"])


def test_gantts_own_paths_keep_their_problem_json(served: tuple[str, str]) -> None:
    url, _ = served
    raw, _ = send(url, request("/v1/resource-stats", "content-length: hi mom"))
    code, headers, body = answer(raw)
    assert code == 400 and headers["content-type"] == "application/problem+json"
    assert json.loads(body) == {"type": "about:blank", "title": "Bad Request", "status": 400,
                                "detail": "content-length header must be an integer", "field": "content-length"}
    # named, as every answer of Gantt's app is, so that a refusal in the client's log can be found in ours
    assert REQUEST_ID.fullmatch(headers["x-openstack-request-id"])


def test_a_request_refused_for_its_framing_is_refused_before_authentication(tmp_path: Path) -> None:
    """A request whose end is unknown is answered 400 and its connection closed before any token is looked at, on
    both faces: as Placement deployed under gunicorn answers (its HTTP server refuses such a head before the app,
    and so before noauth2 or keystone, sees it); only under wsgiref, no deployment's server, would noauth2's 401
    come first. A token checked first would change nothing the client can do: the connection must close anyway."""
    with ServerProcess(f"sqlite:///{tmp_path}/gantt.sqlite", workdir=tmp_path, token="sekrit") as server:
        for path in ("/placement/resource_providers", "/v1/resource-stats"):
            head = [f"POST {path} HTTP/1.1", "host: x", "content-type: application/json", "content-length: hi mom"]
            raw, _ = send(server.url, ("\r\n".join(head) + "\r\n\r\n").encode() + BODY)
            code, headers, _ = answer(raw)
            assert code == 400 and headers["connection"] == "close", raw
            assert REQUEST_ID.fullmatch(headers["x-openstack-request-id"]), raw
            # the same request, framed, is the 401 it would be
            with httpx.Client(base_url=server.url) as http:
                assert http.post(path, content=BODY, headers={"content-type": "application/json"}).status_code == 401


MALFORMED = {
    "negative length": (["content-length: -5"], BODY, "content-length"),
    "length past 64 bits": (["content-length: 99999999999999999999999"], BODY, "content-length"),
    "two lengths": (["content-length: 48", "content-length: 49"], BODY, "content-length"),
    "length then chunked": ([f"content-length: {len(BODY)}", "transfer-encoding: chunked"],
                            b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY), "transfer-encoding"),
    "chunked then length": (["transfer-encoding: chunked", f"content-length: {len(BODY)}"],
                            b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY), "transfer-encoding"),
    "not ending chunked": (["transfer-encoding: gzip"], BODY, "transfer-encoding"),
    "bad chunk size": (["transfer-encoding: chunked"], b"zz\r\n{}\r\n0\r\n\r\n", None),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_framing_is_a_clean_400_on_both_faces(served: tuple[str, str], case: str) -> None:
    url, prefix = served
    headers, body, field = MALFORMED[case]
    raw, took = send(url, request(f"{prefix}/resource_providers", *headers, body=body))
    assert took < HEAD_TIMEOUT / 2
    _, error = placement_error(raw)
    assert error["title"] == "Bad Request" and error["detail"]
    raw, took = send(url, request("/v1/resource-stats", *headers, body=body))
    assert took < HEAD_TIMEOUT / 2
    code, answered, problem = answer(raw)
    assert code == 400 and answered["content-type"] == "application/problem+json"
    assert json.loads(problem).get("field") == field, raw


@pytest.mark.parametrize("gantt", [False, True])
def test_a_body_longer_than_declared_is_refused_and_the_server_serves_on(served: tuple[str, str],
                                                                         gantt: bool) -> None:
    """The bytes past the declared length are read as the next request, which is no request: a 400, and the
    connection closed (the answer to the first may be lost with it, never replaced by a 500)."""
    url, prefix = served
    path = "/v1/resource-stats" if gantt else f"{prefix}/resource_providers"
    raw, took = send(url, request(path, "content-length: 2", body=b"{}" + BODY + b"\r\n\r\n"))
    assert took < HEAD_TIMEOUT / 2
    statuses = [int(line.split()[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
    assert statuses and all(400 <= status < 500 for status in statuses), raw
    with httpx.Client(base_url=url, headers={"x-auth-token": "admin"}) as http:
        assert http.get(f"{prefix}/resource_providers").status_code == 200
