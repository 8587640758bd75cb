"""How Gantt's own routes answer: JSON bodies, problem+json refusals, and a delete's revision."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

from gantt.model import GanttError
from gantt.service.schemas import PROBLEM_JSON, REVISION_HEADER

ENCODER = msgspec.json.Encoder()


def deleted(revision: int) -> Response:
    # 204 carries no body: the revision that holds the delete (a client may wait for a replica to reach it)
    # travels in a header.
    return Response(status_code=204, headers={REVISION_HEADER: str(revision)})


def json_response(value: Any, status: int = 200) -> Response:
    return Response(ENCODER.encode(value), status_code=status, media_type="application/json")


def problem(error: GanttError, headers: dict[str, str] | None = None) -> Response:
    return Response(ENCODER.encode(error.to_problem()), status_code=error.status, media_type=PROBLEM_JSON,
                    headers=headers)

