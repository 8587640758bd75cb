"""What gantt.service.protocol relies on in uvicorn's private HttpToolsProtocol, checked against the installed
uvicorn: the methods it overrides (same parameters), the attributes it reads from the base class's instance, the
fields uvicorn reads and sets on a request cycle (which ``HotCycle`` stands in for) and the pin in pyproject.toml.

A uvicorn release that renames or drops any of these fails here, not in a served request."""

from __future__ import annotations

import ast
import asyncio
import inspect
import socket
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from uvicorn.protocols.http import httptools_impl

from gantt.service import protocol

ROOT = Path(__file__).resolve().parents[2]


def _self_attributes(cls: type, name: str = "self") -> set[str]:
    """Every ``<name>.<attr>`` read or written in ``cls``'s own source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name}


def _cycle_attributes_uvicorn_uses() -> set[str]:
    """The fields HttpToolsProtocol reads or sets on its cycle (``self.cycle.x``, or ``cycle.x`` on a local)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(httptools_impl.HttpToolsProtocol)))
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        on_self_cycle = isinstance(owner, ast.Attribute) and owner.attr == "cycle" \
            and isinstance(owner.value, ast.Name) and owner.value.id == "self"
        on_local_cycle = isinstance(owner, ast.Name) and owner.id == "cycle"
        if on_self_cycle or on_local_cycle:
            out.add(node.attr)
    return out


def test_the_installed_uvicorn_is_the_pinned_one() -> None:
    pins = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
            if d.startswith("uvicorn")]
    assert pins == [f"uvicorn=={metadata.version('uvicorn')}"], (
        "protocol.py subclasses uvicorn's private HttpToolsProtocol: pin the exact release this test passed with")


def test_every_overridden_method_exists_with_the_same_parameters() -> None:
    base = httptools_impl.HttpToolsProtocol
    own = {name for name, value in vars(protocol.BoundedHttpToolsProtocol).items() if inspect.isfunction(value)}
    overridden = {name for name in own if hasattr(base, name)}
    # The hooks it must override to do its work: a release that drops one would silently skip the limit.
    assert {"connection_made", "connection_lost", "data_received", "on_message_begin", "on_url", "on_header",
            "on_headers_complete", "on_body", "on_message_complete", "on_response_complete",
            "send_400_response"} <= overridden
    for name in overridden - {"__init__"}:
        ours = list(inspect.signature(getattr(protocol.BoundedHttpToolsProtocol, name)).parameters)
        theirs = list(inspect.signature(getattr(base, name)).parameters)
        assert ours == theirs, f"{name}: uvicorn's takes {theirs}, ours {ours}"
    assert list(inspect.signature(base.__init__).parameters)[:4] == ["self", "config", "server_state", "app_state"]


def test_status_lines_are_there() -> None:
    assert httptools_impl.STATUS_LINE[200].startswith(b"HTTP/1.1 200")
    assert httptools_impl.STATUS_LINE[409].endswith(b"\r\n")


def test_hot_cycle_has_every_field_uvicorn_touches_on_a_cycle() -> None:
    used = _cycle_attributes_uvicorn_uses()
    assert {"response_complete", "keep_alive", "disconnected", "message_event"} <= used  # the scan sees them
    hot = set(protocol.HotCycle.__slots__) | {n for n in dir(protocol.HotCycle) if not n.startswith("_")}
    # HotCycle never goes through uvicorn's ASGI path, so what only that path sets (its own run_asgi, send,
    # the body it streams) need not be there; what the protocol itself touches must.
    asgi_only = {"run_asgi", "transport", "flow", "response_started", "waiting_for_100_continue", "send",
                 "receive", "default_headers"}
    missing = sorted(used - hot - asgi_only)
    assert not missing, f"uvicorn's protocol touches {missing} on a cycle, which HotCycle does not have"


class _App:
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def test_the_base_instance_has_what_the_subclass_reads() -> None:
    """A real protocol on a real socket pair, one request answered: every attribute of the base class's instance
    that BoundedHttpToolsProtocol and HotCycle read is there."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    reads = (_self_attributes(protocol.BoundedHttpToolsProtocol) | _self_attributes(protocol.HotCycle, "protocol"))
    own = set(vars(protocol.BoundedHttpToolsProtocol)) | {
        "_head_bytes", "_header_count", "_in_head", "_head_timer", "_rejected", "_tail", "_head_read", "_spread",
        "_leaving", "_fd"}
    needed = sorted(reads - own)
    assert {"transport", "parser", "cycle", "url", "headers", "loop", "flow", "tasks", "pipeline"} <= set(needed)

    async def run() -> dict[str, bool]:
        config = Config(app=_App(), log_level="warning", lifespan="off", http="httptools")
        config.load()
        seen: dict[str, bool] = {}

        class Spy(protocol.BoundedHttpToolsProtocol):
            def on_headers_complete(self) -> None:  # mid-request: where the subclass reads the most
                seen.update({name: hasattr(self, name) for name in needed})
                super().on_headers_complete()

        proto = Spy(config=config, server_state=ServerState(), app_state={})
        server_sock, client_sock = socket.socketpair()
        loop = asyncio.get_running_loop()
        await loop.connect_accepted_socket(lambda: proto, server_sock)
        reader, writer = await asyncio.open_connection(sock=client_sock)
        writer.write(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(4096), 5)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        writer.close()
        proto.transport.close()
        return seen

    seen = asyncio.run(run())
    assert seen, "on_headers_complete was never called"
    missing = sorted(name for name, present in seen.items() if not present)
    assert not missing, f"uvicorn's HttpToolsProtocol no longer has {missing}, which protocol.py reads"
