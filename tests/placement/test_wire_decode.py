"""Bodies are decoded to their Struct in one pass (``wire.json_body``); what it takes and refuses must be what
the two-pass decode (JSON to Python, then ``msgspec.convert``) takes and refuses, whose refusals name the value
in Placement's words."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from gantt.placement.api.errors import PlacementError
from gantt.placement.api.wire import (
    ConsumerIn,
    InventoriesIn,
    PlacementRequest,
    ProviderIn114,
    ProviderTraitsIn,
    json_body,
)

BODIES: list[tuple[Any, bytes]] = [
    (ProviderIn114, b'{"name": "cn1", "uuid": "00000000-0000-0000-0000-000000000001"}'),
    (ProviderIn114, b'{"name": "cn1", "parent_provider_uuid": null}'),
    (ProviderIn114, b'{"name": "cn1", "name": "cn2"}'),  # a repeated key: the last one, either way
    (ProviderIn114, b'{"name": 1}'),
    (ProviderIn114, b'{"name": "' + b"x" * 201 + b'"}'),
    (ProviderIn114, b'{"name": "cn1", "extra": 1}'),
    (ProviderIn114, b'{}'),
    (ProviderIn114, b'[1]'),
    (ProviderIn114, b'{"name": "cn1"'),
    (InventoriesIn, b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}'),
    (InventoriesIn, b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8.0}}}'),
    (InventoriesIn, b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 0}}}'),
    (InventoriesIn, b'{"resource_provider_generation": 0, "inventories": {"vcpu": {"total": 8}}}'),
    (InventoriesIn, b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8, '
                    b'"allocation_ratio": 1}}}'),
    (InventoriesIn, b'{"resource_provider_generation": true, "inventories": {}}'),
    (InventoriesIn, b'{"resource_provider_generation": 99999999999999999999999, "inventories": {}}'),
    (ProviderTraitsIn, b'{"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX", ""]}'),
    (ProviderTraitsIn, b'{"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX"]}'),
    (ConsumerIn, b'{"allocations": {"00000000-0000-0000-0000-000000000001": {"resources": {"VCPU": 1}}}, '
                 b'"project_id": "p", "user_id": "u", "consumer_generation": null}'),
    (ConsumerIn, b'{"allocations": [{"resource_provider": {"uuid": "x"}, "resources": {"VCPU": 1}}]}'),
    (ConsumerIn, b'{"allocations": {"x": {"resources": {"VCPU": -1}}}}'),
]


def _request(raw: bytes) -> PlacementRequest:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    return PlacementRequest({"headers": [(b"content-type", b"application/json")]}, receive)


def _two_pass(raw: bytes, type_: Any) -> Any:
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return "malformed"
    try:
        return msgspec.convert(data, type_, strict=True)
    except msgspec.ValidationError:
        return "invalid"


@pytest.mark.parametrize(("type_", "raw"), BODIES)
def test_one_pass_takes_and_refuses_what_two_passes_do(type_: Any, raw: bytes) -> None:
    expected = _two_pass(raw, type_)
    try:
        got: Any = asyncio.run(json_body(_request(raw), type_))
    except PlacementError as exc:
        assert exc.status == 400
        got = "malformed" if "Malformed JSON" in exc.detail else "invalid"
    assert got == expected
