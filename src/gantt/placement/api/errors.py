"""Placement's error body: ``{"errors": [{status, title, detail, request_id, code}]}`` (``code`` from 1.23)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from gantt.base.quote import clip

DEFAULT_CODE = "placement.undefined_code"
CODE_VERSION = 23  # 1.23: errors carry a code


class PlacementError(Exception):
    """An answer that is an error. ``code``: Placement's error code; ``versions``: name the served range
    (a 406 for an unacceptable microversion does)."""

    def __init__(self, status: int, detail: str, *, code: str = DEFAULT_CODE, versions: bool = False,
                 headers: dict[str, str] | None = None) -> None:
        detail = clip(detail)  # whatever value a handler quoted in it, as a client sent it
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code
        self.versions = versions
        self.headers = headers or {}

    @property
    def title(self) -> str:
        return HTTPStatus(self.status).phrase

    def body(self, request_id: str, *, with_code: bool, versions: tuple[str, str]) -> dict[str, Any]:
        error: dict[str, Any] = {"status": self.status, "title": self.title, "detail": self.detail,
                                 "request_id": request_id}
        if with_code:
            error["code"] = self.code
        if self.versions:
            error["min_version"], error["max_version"] = versions
        return {"errors": [error]}
