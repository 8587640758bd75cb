"""The hot routes' answers (``responses.json_response``, ``responses.deleted``) built with their heads given as is:
the same status, body, headers (in order) and media type as Starlette's own ``Response`` makes of the same
arguments, and the same messages on the wire."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest
from starlette.responses import Response

from gantt.model import Selection
from gantt.service.responses import deleted, json_response
from gantt.service.schemas import REVISION_HEADER, Selections, Written


def _sent(response: Response) -> list[MutableMapping[str, Any]]:
    messages: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        messages.append(message)

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.disconnect"}

    asyncio.run(response({"type": "http"}, receive, send))
    return messages


def _same(ours: Response, theirs: Response) -> None:
    assert type(ours) is Response
    assert (ours.status_code, ours.body, ours.raw_headers, ours.media_type) == \
        (theirs.status_code, theirs.body, theirs.raw_headers, theirs.media_type)
    assert dict(ours.headers) == dict(theirs.headers) and ours.background is None
    assert _sent(ours) == _sent(theirs)


SELECTION = Selection(host="h1", nodename="h1", uuid="u-1", consumer_uuid="c-1", allocation={"VCPU": 1})


@pytest.mark.parametrize("value", [Written(revision=7), Selections(selections=[[SELECTION]]), {"a": "é"}, [], None])
@pytest.mark.parametrize("status", [200, 201, 204, 304, 404, 503])
def test_a_json_answer_is_starlettes(value: Any, status: int) -> None:
    from gantt.service.responses import ENCODER

    _same(json_response(value, status), Response(ENCODER.encode(value), status_code=status,
                                                 media_type="application/json"))


@pytest.mark.parametrize("revision", [0, 1, 12345, 2**62])
def test_a_delete_answer_is_starlettes(revision: int) -> None:
    _same(deleted(revision), Response(status_code=204, headers={REVISION_HEADER: str(revision)}))


def test_the_check_can_fail() -> None:
    """A head out of order, or a length left out, is told apart."""
    theirs = Response(b"{}", media_type="application/json")
    swapped = Response(b"{}", media_type="application/json")
    swapped.raw_headers = list(reversed(swapped.raw_headers))
    with pytest.raises(AssertionError):
        _same(swapped, theirs)
