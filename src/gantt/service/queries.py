"""The query and path parameters of Gantt's own routes: which each path takes, names held to a Name's limits, and
listings cut into pages (``limit``, ``marker``, a ``next`` link)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlencode

from starlette.requests import Request

from gantt.model import InvalidRequest, valid_name
from gantt.service.schemas import Link

T = TypeVar("T")

DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() takes '²' and '٣'


# The query parameters each path takes; any other is a 400, as an unknown body field is: a mistyped ``?nod=``
# on DELETE /v1/hosts/{host} would otherwise delete every node of the host instead of one.
_QUERY: dict[str, frozenset[str]] = {"/v1/hosts/{host}": frozenset({"node"}),
                                     "DELETE /v1/hosts/{host}": frozenset({"node", "force"}),
                                     "/v1/candidates": frozenset({"limit"}),
                                     "/v1/hosts": frozenset({"limit", "marker"}),
                                     "/v1/allocations": frozenset({"limit", "marker"})}
# ``limit`` is a number, checked by its handler; a hosts ``marker`` is "host/node", checked by its handler
_NAME_PARAMETERS = frozenset({"node"})
# The most items one page may ask for (Nova's [api] max_limit default); without ``limit`` a listing is whole.
MAX_PAGE = 1000


def query_params(request: Request) -> dict[str, str]:
    """The request's query parameters, each known to its route and given at most once."""
    if not request.scope.get("query_string"):
        return {}  # every hot request: no QueryParams to parse out of nothing
    route = request.scope.get("route")
    path = route.path if route is not None else ""
    allowed = _QUERY.get(f"{request.method} {path}") or _QUERY.get(path, frozenset())
    seen: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise InvalidRequest(f"unknown query parameter {name[:64]!r} (this call takes: {known})",
                                 field=name[:64])
        if name in seen:
            raise InvalidRequest(f"query parameter {name!r} given more than once", field=name)
        if name in _NAME_PARAMETERS:
            check_name(name, value)
        seen[name] = value
    return seen


def check_name(parameter: str, value: str) -> None:
    """A path or query parameter names what a body created with a Name: held to the same limits, an over-long
    one is refused as a body field would be rather than looked up (and echoed back whole in a 404)."""
    if not valid_name(value):
        raise InvalidRequest(f"{parameter} must be 1-255 characters, without '/' or control characters, and not "
                             f"'.' or '..' (got {len(value)} characters)", field=parameter)


def page_limit(query: dict[str, str], maximum: int) -> int | None:
    raw = query.get("limit")
    if raw is None:
        return None
    if not DIGITS.fullmatch(raw) or not 1 <= int(raw) <= maximum:
        raise InvalidRequest(f"limit must be an integer from 1 to {maximum}", field="limit")
    return int(raw)


def paginate(items: list[T], key: Callable[[T], str], query: dict[str, str], path: str) -> tuple[list[T], list[Link]]:
    """One page of ``items`` (sorted by ``key``): those after the item whose key is ``marker``, at most ``limit``
    of them, and a ``next`` link when more follow. A marker that names no item is a 400, as in Nova."""
    limit = page_limit(query, MAX_PAGE)
    marker = query.get("marker")
    start = 0
    if marker is not None:
        keys = [key(item) for item in items]
        start = bisect.bisect_left(keys, marker)
        if start == len(keys) or keys[start] != marker:
            raise InvalidRequest(f"marker {marker[:300]!r} names nothing in this listing (it is the last item's "
                                 "key of the page before)", field="marker")
        start += 1
    if limit is None:
        return items[start:], []
    page = items[start:start + limit]
    links = []
    if start + limit < len(items):
        links.append(Link(rel="next", href=f"{path}?{urlencode({'limit': limit, 'marker': key(page[-1])})}"))
    return page, links


def host_key(host: str, nodename: str) -> str:
    """How a node is named in one string (a hosts ``marker``): the host, or "host/node" for a node of another
    name; names hold no '/'."""
    return host if nodename == host else f"{host}/{nodename}"

