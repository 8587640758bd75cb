"""The live view: the page and its assets under ``/ui``, as the package ships them (src/gantt/service/ui)."""

from __future__ import annotations

import importlib.resources
import os

from starlette.requests import Request
from starlette.responses import Response

from gantt.model import NotFound

UI = "/ui"  # the page and its assets: no token (they hold no data); the page asks /v1/overview with one
# (pyproject's package-data ships these kinds of files)
_UI_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8"}
# Nothing inline, nothing from elsewhere: the page runs only its own files and talks only to this service.
_UI_HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                          "form-action 'none'; frame-ancestors 'none'",
               "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


def ui_assets() -> dict[str, tuple[bytes, str]]:
    """The page's files as the package ships them (src/gantt/service/ui), read once."""
    folder = importlib.resources.files("gantt.service") / "ui"
    assets = {}
    for item in folder.iterdir():
        suffix = os.path.splitext(item.name)[1]
        if item.is_file() and suffix in _UI_TYPES:
            assets[item.name] = (item.read_bytes(), _UI_TYPES[suffix])
    return assets


async def ui_asset(request: Request) -> Response:
    if request.url.path == UI:
        # The page names its files and the API relative to itself (ui/ → ui/app.js, ../v1/overview), so that it
        # works behind a proxy that serves Gantt under a path prefix; that needs the address to end in "/". The
        # redirect is relative too (a proxy's prefix is not ours to know); the browser keeps a #token= fragment.
        return Response(status_code=308, headers={"Location": "ui/", **_UI_HEADERS})
    name = request.path_params.get("asset", "index.html")
    found = request.app.state.ui.get(name)
    if found is None:
        raise NotFound(f"no such path {request.url.path}")
    body, media_type = found
    return Response(body, media_type=media_type, headers=_UI_HEADERS)

