"""The few etcd v3 messages a commit sends, written straight to protobuf's wire format.

Building a claim's txn as protobuf objects (a Compare, a RequestOp and a PutRequest per key, each field set through
the runtime) cost ~75 µs of an instance's CPU per claim, more than etcd's own apply of it; these functions write
the same bytes in a few µs (``tests/etcd/test_wire.py`` checks them byte for byte against the protobuf runtime).
Only what the store's writes use is here: Compare on a key's mod revision, put, delete, range, and a txn of
them, nested or not. Every other call goes through the generated stubs as before.

Messages of etcd's rpc.proto (field numbers): Compare {result 1, target 2, key 3, mod_revision 6, range_end 64},
RequestOp {request_range 1, request_put 2, request_delete_range 3, request_txn 4}, RangeRequest {key 1,
range_end 2, keys_only 8}, PutRequest {key 1, value 2}, DeleteRangeRequest {key 1}, TxnRequest {compare 1,
success 2, failure 3}. Fields are written in field-number order and proto3 defaults are left out, as the runtime
does, except ``mod_revision``: it sits in a oneof, so the runtime writes it even when 0.
"""

from __future__ import annotations

from collections.abc import Sequence

EQUAL = 0
LESS = 2
_MOD = 2  # Compare.CompareTarget.MOD


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 on the wire: two's complement, ten bytes
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SHORT = [bytes((n,)) for n in range(0x80)]  # the lengths of one byte, made once: most of a claim's fields


def _field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field: its tag (field number << 3 | 2, written out), the length, the bytes."""
    n = len(data)
    return tag + (_SHORT[n] if n < 0x80 else _varint(n)) + data


def _bytes(tag: bytes, data: bytes) -> bytes:
    """A proto3 bytes field: left out when empty."""
    return _field(tag, data) if data else b""


def compare_mod(key: bytes, revision: int, result: int = EQUAL, range_end: bytes = b"") -> bytes:
    """A Compare of ``key``'s mod revision (of every key in [key, range_end) when given) with ``revision``."""
    out = (b"\x08" + _varint(result) if result else b"") + b"\x10\x02" + _bytes(b"\x1a", key) \
        + b"\x30" + _varint(revision)
    return out + _bytes(b"\x82\x04", range_end)


def put(key: bytes, value: bytes = b"") -> bytes:
    """A RequestOp putting ``value`` at ``key``."""
    return _field(b"\x12", _bytes(b"\x0a", key) + _bytes(b"\x12", value))


def delete(key: bytes) -> bytes:
    """A RequestOp deleting ``key``."""
    return _field(b"\x1a", _bytes(b"\x0a", key))


def read(key: bytes, *, keys_only: bool = False) -> bytes:
    """A RequestOp reading ``key`` (only its metadata with ``keys_only``)."""
    return _field(b"\x0a", _bytes(b"\x0a", key) + (b"\x40\x01" if keys_only else b""))


def txn(compares: Sequence[bytes], success: Sequence[bytes], failure: Sequence[bytes] = ()) -> bytes:
    """A TxnRequest: ``compares`` are Compare messages, ``success`` and ``failure`` RequestOps (all as bytes)."""
    return b"".join([*(_field(b"\x0a", c) for c in compares), *(_field(b"\x12", op) for op in success),
                     *(_field(b"\x1a", op) for op in failure)])


def nested(request: bytes) -> bytes:
    """A RequestOp carrying a TxnRequest (``txn``'s bytes) to run inside another txn."""
    return _field(b"\x22", request)
