"""What a Placement request and answer look like on the wire: content negotiation, bodies, query strings,
cache headers, and the body shapes (msgspec Structs standing in for Placement's JSON schemas)."""

from __future__ import annotations

import email.utils
import functools
import re
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType
from starlette.datastructures import URL, QueryParams
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from gantt.base.quote import quote
from gantt.model import GanttError, InvalidRequest, prepare_types
from gantt.placement.api.errors import PlacementError
from gantt.placement.api.microversion import Version
from gantt.replication.driver import Runtime
from gantt.replication.steps import Steps

T = TypeVar("T")
MAX_INT = 2**31 - 1
FLOAT_MAX = 3.40282e38  # Placement's SQL single-precision float bound for allocation_ratio
Count = Annotated[int, Meta(ge=1, le=MAX_INT)]
ClassName = Annotated[str, Meta(pattern=r"^[A-Z0-9_]+$")]
CustomName = Annotated[str, Meta(pattern=r"^CUSTOM_[A-Z0-9_]+$", max_length=255)]
TraitName = Annotated[str, Meta(min_length=1, max_length=255)]
_ENCODER = msgspec.json.Encoder()


_BASE_URLS: dict[tuple[Any, ...], URL] = {}


class PlacementRequest:
    """What the handlers read of a request, straight from the ASGI scope: its headers (the first value of each
    name, as Starlette's ``Headers.get``), its query, its body, and its base URL for a Location header.

    Starlette's Request made each header lookup a scan of the raw list and its body an async stream, per
    request: profiled, the HTTP layer was half of the server's CPU per provider write."""

    __slots__ = ("_body", "_headers", "_query", "_receive", "max_body", "scope")

    def __init__(self, scope: Scope, receive: Receive, max_body: int | None = None) -> None:
        self.scope = scope
        self._receive = receive
        self.max_body = max_body  # bytes; gantt serve's HTTP layer refuses larger bodies before they are read
        self._headers: dict[str, str] | None = None
        self._query: QueryParams | None = None
        self._body: bytes | None = None

    @property
    def headers(self) -> dict[str, str]:
        if self._headers is None:
            headers: dict[str, str] = {}
            for name, value in self.scope["headers"]:
                headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
            self._headers = headers
        return self._headers

    @property
    def query_params(self) -> QueryParams:
        if self._query is None:
            self._query = QueryParams(self.scope.get("query_string", b""))
        return self._query

    @property
    def base_url(self) -> URL:
        """Starlette's base URL of the request (for Location headers: every create has one), made once per
        distinct scheme, server, Host header and root path: Starlette parses it from the scope each time."""
        scope = self.scope
        key = (scope.get("scheme", "http"), scope.get("server"), self.headers.get("host"),
               scope.get("app_root_path", scope.get("root_path", "")))
        found = _BASE_URLS.get(key)
        if found is None:
            if len(_BASE_URLS) >= 256:
                _BASE_URLS.clear()
            found = _BASE_URLS[key] = Request(scope).base_url
        return found

    async def body(self) -> bytes:
        """The whole body, read once (a handler may ask again): 413 past ``max_body``, counted as it arrives (a
        chunked body declares no length), where this app is served without gantt serve's HTTP layer."""
        if self._body is None:
            limit = self.max_body
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await self._receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect()
                chunk = message.get("body", b"")
                size += len(chunk)
                if limit is not None and size > limit:
                    raise PlacementError(413, f"The request body is larger than the limit of {limit} bytes.")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            self._body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return self._body


class Answer:
    """An answer with its whole body: the headers Starlette's Response would send (``content-length`` but on
    1xx/204/304, ``content-type`` for a ``media_type``), sent as two ASGI messages without its header objects."""

    __slots__ = ("body", "headers", "status_code")

    def __init__(self, body: bytes = b"", status_code: int = 200, media_type: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.body = body
        self.status_code = status_code
        out = {name.lower(): value for name, value in headers.items()} if headers else {}
        if "content-length" not in out and not (status_code < 200 or status_code in (204, 304)):
            out["content-length"] = str(len(body))
        if media_type is not None and "content-type" not in out:
            out["content-type"] = media_type + ("; charset=utf-8" if media_type.startswith("text/") else "")
        self.headers = out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in self.headers.items()]
        await send({"type": "http.response.start", "status": self.status_code, "headers": raw})
        await send({"type": "http.response.body", "body": self.body})


@dataclass
class Call:
    """One request as the handlers see it: the request, its microversion, the façade, where its operations may run
    off the loop, and where it is mounted."""

    request: PlacementRequest
    version: Version
    # gantt.placement.facade.Placement, typed loosely: gantt.config reads this package's policy, which imports this
    # module, and the façade's replica imports gantt.config
    placement: Any
    runtime: Runtime
    prefix: str
    params: dict[str, str] = field(default_factory=dict)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a façade call off the event loop (it may wait on the store)."""
        return await self.runtime.run(lambda: fn(*args, **kwargs))

    async def steps(self, make: Callable[..., Steps[T]], *args: Any, **kwargs: Any) -> T:
        """A façade write given as steps (``make(*args, **kwargs)``), run by the replica where it costs least
        (``Replica.perform``: on the loop, its commits handed to the store's own writer, where the store has one;
        else on a handler thread)."""
        answer: T = await self.placement.replica.perform(make(*args, **kwargs), self.runtime)
        return answer

    async def check_provider(self, uuid: str) -> None:
        """404 for an unknown provider, before its body is read (Placement's order). A provider this replica
        holds costs no thread hop; the write that follows checks it again under the lock."""
        if not self.placement.has_provider(uuid):
            await self.call(self.placement.provider, uuid)

    def url(self, path: str) -> str:
        return self.prefix + path


# ------------------------------------------------------------------------------------------- requests


def accept_json(request: PlacementRequest) -> None:
    """406 unless the Accept header (if any) takes application/json."""
    accept = request.headers.get("accept")
    if not accept:
        return
    for part in accept.split(","):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0 and media.strip().lower() in ("application/json", "application/*", "*/*"):
            return
    raise PlacementError(406, "Only application/json is provided")


def require_json(request: PlacementRequest) -> None:
    """415 unless the body is declared JSON (Placement checks this before it looks anything up)."""
    length = request.headers.get("content-length")
    if length is not None and not length.strip().isdigit():
        raise PlacementError(400, "content-length header must be an integer")
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not media:
        if length is not None and int(length) > 0:
            raise PlacementError(400, "content-type header required when content-length is set")
        raise PlacementError(415, "The media type None is not supported, use application/json")
    if media != "application/json":
        raise PlacementError(415, f"The media type {media} is not supported, use application/json")


async def json_body(request: PlacementRequest, type_: type[T]) -> T:
    """The body as ``type_``: 415 without a JSON content type, 400 for malformed JSON or a schema mismatch."""
    require_json(request)
    raw = await request.body()
    body_type: Any = type_  # the cache's key (mypy does not take a type variable's class for hashable)
    try:  # one pass, JSON to the body's Struct: a refusal is decoded again below, for its message's words
        return _decoder(body_type).decode(raw)  # type: ignore[no-any-return]  # the decoder of type_ answers a T
    except msgspec.DecodeError:
        pass
    except (RecursionError, UnicodeDecodeError) as exc:  # raised past msgspec's own error: a 400 as /v1's
        raise _malformed(exc) from None
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise PlacementError(400, f"Malformed JSON: {exc}") from None
    except (RecursionError, UnicodeDecodeError) as exc:
        raise _malformed(exc) from None
    try:
        return msgspec.convert(data, type_, strict=True)
    except msgspec.ValidationError as exc:
        raise PlacementError(400, f"JSON does not validate: {schema_words(str(exc), data)}") from None


def _malformed(exc: Exception) -> PlacementError:
    """A body msgspec refuses with an error of Python's (nesting past the interpreter's recursion limit, a string
    that is not UTF-8), as Placement words a body it cannot decode."""
    if isinstance(exc, UnicodeDecodeError):
        return PlacementError(400, "Malformed JSON: the body is not valid UTF-8")
    return PlacementError(400, "Malformed JSON: nested too deeply")


@functools.lru_cache(maxsize=64)
def _decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(type_, strict=True)


_PATH = re.compile(r" - at `\$((?:\.[^.`\[]+|\[\d+\])*)`$")
_RULES = [
    (re.compile(r"^Object contains unknown field `([^`]*)`"), "additionalProperties"),
    (re.compile(r"^Object missing required field `([^`]*)`"), "required"),
    (re.compile(r"^Expected `\w+` of length <= (\d+)"), "maxLength"),
    (re.compile(r"^Expected `\w+` of length >= (\d+)"), "minLength"),
    (re.compile(r"^Expected `\w+` >= (\S+)"), "minimum"),
    (re.compile(r"^Expected `\w+` <= (\S+)"), "maximum"),
    (re.compile(r"^Expected `str` matching regex '([^']*)'"), "pattern"),
    (re.compile(r"^Expected `([^`]*)`, got `[^`]*`"), "type"),
]
_JSON_TYPES = {"int": "integer", "str": "string", "float": "number", "bool": "boolean", "array": "array",
               "object": "object"}


def schema_words(message: str, data: Any) -> str:
    """msgspec's validation message in jsonschema's words, naming the value and the rule (Placement validates
    with jsonschema; clients and Placement's own tests match on its wording)."""
    where = _PATH.search(message)
    parts = re.findall(r"\.([^.\[]+)|\[(\d+)\]", where.group(1)) if where else []
    keys: list[str | int] = [name or int(index) for name, index in parts]
    text = message[:where.start()] if where else message
    for pattern, rule in _RULES:
        match = pattern.search(text)
        if match is None:
            continue
        value = quote(_at(data, keys))  # a prefix only: the value may be megabytes long
        arg = match.group(1)
        said = {"additionalProperties": f"Additional properties are not allowed ({quote(arg)} was unexpected)",
                "required": f"'{arg}' is a required property",
                "maxLength": f"{value} is too long", "minLength": f"{value} is too short",
                "minimum": f"{value} is less than the minimum of {arg}",
                "maximum": f"{value} is greater than the maximum of {arg}",
                "pattern": f"{value} does not match {arg!r}",
                "type": f"{value} is not of type '{_JSON_TYPES.get(arg.split(' ')[0], arg)}'"}[rule]
        schema = "".join(f"['properties'][{k!r}]" if isinstance(k, str) else "['items']" for k in keys)
        # Placement's error page folds jsonschema's line breaks into spaces: clients that show a detail's last
        # line (osc-placement) then show all of it.
        return f"{said}  Failed validating '{rule}' in schema{schema}"
    return message


def _at(data: Any, keys: list[str | int]) -> Any:
    for key in keys:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def query(request: PlacementRequest, allowed: set[str]) -> dict[str, list[str]]:
    """The query string, every name in ``allowed`` (400 naming the first that is not)."""
    out: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        if name not in allowed:
            raise PlacementError(400, "Invalid query string parameters: Additional properties are not allowed "
                                      f"('{name}' was unexpected)")
        out.setdefault(name, []).append(value)
    return out


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def valid_uuid(value: str, what: str) -> str:
    """A uuid in its canonical dashed form (Placement takes the undashed hex form too)."""
    if _CANONICAL_UUID.fullmatch(value):  # what clients send: already canonical, no UUID object made
        return value
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise PlacementError(400, f"JSON does not validate: {quote(value)} is not a 'uuid' ({what}): Failed "
                                  "validating 'format'") from None


def uuid_like(value: str) -> bool:
    if _CANONICAL_UUID.fullmatch(value):
        return True
    try:
        uuidlib.UUID(value)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------------- answers


def json_response(call: Call, data: Any, *, status: int = 200, modified: float | None = None,
                  headers: dict[str, str] | None = None) -> Answer:
    """A JSON answer; from 1.15 with ``last-modified`` (``modified``, else now) and ``cache-control``."""
    out = dict(headers or {})
    if call.version.at_least(15):
        out["last-modified"] = http_date(modified or time.time())
        out["cache-control"] = "no-cache"
    return Answer(_ENCODER.encode(data), status_code=status, media_type="application/json", headers=out)


def empty(status: int = 204, headers: dict[str, str] | None = None, *, call: Call | None = None) -> Answer:
    """An answer without a body (nor a content type); with ``call`` from 1.15 it carries the cache headers, as
    Placement's do where a resource is shown or written by a bodiless answer (traits, PUT resource class)."""
    headers = dict(headers or {})
    if call is not None and call.version.at_least(15):
        headers["last-modified"] = http_date(time.time())
        headers["cache-control"] = "no-cache"
    return Answer(b"", status_code=status, headers=headers)


def http_date(ts: float) -> str:
    return _http_date(int(ts))


@functools.lru_cache(maxsize=1024)
def _http_date(seconds: int) -> str:
    # An HTTP date has whole seconds: one formatting per second, not one per answer.
    return email.utils.formatdate(seconds, usegmt=True)


def gantt_error(exc: GanttError) -> PlacementError:
    """A domain error as Placement answers it (its code, when it has one)."""
    code = getattr(exc, "placement_code", None)
    status = exc.status
    detail = exc.message
    if isinstance(exc, InvalidRequest) and status == 400:
        detail = re.sub(r" \(at \$[^)]*\)$", "", detail)
    return PlacementError(status, detail, **({"code": code} if code else {}))


# ---------------------------------------------------------------------------------------------- bodies


class ProviderIn(Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(max_length=200)]
    uuid: str | UnsetType = UNSET


class ProviderIn114(Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(max_length=200)]
    uuid: str | UnsetType = UNSET
    parent_provider_uuid: str | UnsetType | None = UNSET


class ProviderUpdate(Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(max_length=200)]


class ProviderUpdate114(Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(max_length=200)]
    parent_provider_uuid: str | UnsetType | None = UNSET


class InventoryIn(Struct, forbid_unknown_fields=True):
    """One inventory (PUT /inventories/{rc} needs the generation; inside PUT /inventories it may be given)."""

    total: Count
    resource_provider_generation: int | UnsetType = UNSET
    reserved: Annotated[int, Meta(ge=0, le=MAX_INT)] = 0
    min_unit: Count = 1
    max_unit: Count = MAX_INT
    step_size: Count = 1
    allocation_ratio: Annotated[float, Meta(le=FLOAT_MAX)] = 1.0


class NewInventoryIn(Struct, forbid_unknown_fields=True):
    resource_class: ClassName
    total: Count
    # Placement's schema admits it in POST and Placement 16 never reads it (a stale value still gets 201):
    # taken, so that clients written against Placement work, and ignored as Placement ignores it.
    resource_provider_generation: int | UnsetType = UNSET
    reserved: Annotated[int, Meta(ge=0, le=MAX_INT)] = 0
    min_unit: Count = 1
    max_unit: Count = MAX_INT
    step_size: Count = 1
    allocation_ratio: Annotated[float, Meta(le=FLOAT_MAX)] = 1.0


class InventoriesIn(Struct, forbid_unknown_fields=True):
    resource_provider_generation: int
    inventories: dict[ClassName, InventoryIn]


class ProviderTraitsIn(Struct, forbid_unknown_fields=True):
    resource_provider_generation: int
    traits: list[TraitName]


class AggregatesIn(Struct, forbid_unknown_fields=True):
    resource_provider_generation: int
    aggregates: list[str]


class ResourceClassIn(Struct, forbid_unknown_fields=True):
    name: CustomName


ExternalId = Annotated[str, Meta(min_length=1, max_length=255)]
ConsumerType = Annotated[str, Meta(pattern=r"^[A-Z0-9_]+$", min_length=1, max_length=255)]


class ProviderRef(Struct, forbid_unknown_fields=True):
    uuid: str


class AllocationEntry(Struct, forbid_unknown_fields=True):
    """One entry of the list form of allocations (microversions before 1.12)."""

    resource_provider: ProviderRef
    resources: dict[ClassName, Count]


class ProviderAllocation(Struct, forbid_unknown_fields=True):
    """One provider's part in the dict form (from 1.12); ``generation`` is accepted and not compared, as in
    Placement."""

    resources: dict[ClassName, Count]
    generation: int | UnsetType = UNSET


class ConsumerIn(Struct, forbid_unknown_fields=True):
    """Every field any microversion allows; which ones a version requires or refuses is checked by the handler
    (``placement.allocations``), as Placement's per-version schemas do."""

    allocations: dict[str, ProviderAllocation] | list[AllocationEntry]
    project_id: ExternalId | UnsetType = UNSET
    user_id: ExternalId | UnsetType = UNSET
    consumer_generation: int | UnsetType | None = UNSET
    mappings: dict[str, list[str]] | UnsetType = UNSET
    consumer_type: ConsumerType | UnsetType = UNSET


class ReshapeIn(Struct, forbid_unknown_fields=True):
    """POST /reshaper's body: inventories by provider uuid, allocations by consumer uuid (per version: its handler)."""

    inventories: dict[str, InventoriesIn]
    allocations: dict[str, ConsumerIn]


prepare_types(globals())  # build msgspec type info before any thread decodes (see model.prepare_types)
