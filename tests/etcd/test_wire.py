"""The hand-written wire format of a commit's messages (store.etcd_wire) is byte for byte what the protobuf runtime
writes for the same messages, and etcd runs it: a wrong tag or length would be a refused or misread txn."""

from __future__ import annotations

import pytest
from aetcd.rpc import rpc_pb2 as pb

from gantt.store import etcd_wire as wire

KEYS = [b"", b"/gantt/usage/n1/n1", b"k" * 127, b"k" * 128, b"\xff" * 300, b"x" * 20_000]
REVISIONS = [0, 1, 127, 128, 2**31, 2**62, -1]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("revision", REVISIONS)
def test_compares(key: bytes, revision: int) -> None:
    assert wire.compare_mod(key, revision) == pb.Compare(
        key=key, target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=revision).SerializeToString()
    assert wire.compare_mod(key, revision, wire.LESS, key + b"\x00") == pb.Compare(
        key=key, range_end=key + b"\x00", target=pb.Compare.MOD, result=pb.Compare.LESS,
        mod_revision=revision).SerializeToString()


@pytest.mark.parametrize("key", KEYS)
def test_request_ops(key: bytes) -> None:
    for value in (b"", b"{}", b"v" * 200, b"v" * 70_000):
        assert wire.put(key, value) == pb.RequestOp(
            request_put=pb.PutRequest(key=key, value=value)).SerializeToString()
    assert wire.delete(key) == pb.RequestOp(
        request_delete_range=pb.DeleteRangeRequest(key=key)).SerializeToString()
    assert wire.read(key) == pb.RequestOp(request_range=pb.RangeRequest(key=key)).SerializeToString()
    assert wire.read(key, keys_only=True) == pb.RequestOp(
        request_range=pb.RangeRequest(key=key, keys_only=True)).SerializeToString()


def test_txns_nested_or_not() -> None:
    compares = [pb.Compare(key=b"a", target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=5),
                pb.Compare(key=b"c", target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=0)]
    success = [pb.RequestOp(request_put=pb.PutRequest(key=b"a", value=b"x" * 300)),
               pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"b"))]
    failure = [pb.RequestOp(request_range=pb.RangeRequest(key=b"a", keys_only=True))]
    inner = pb.TxnRequest(compare=compares, success=success, failure=failure)
    mine = wire.txn([wire.compare_mod(b"a", 5), wire.compare_mod(b"c", 0)],
                    [wire.put(b"a", b"x" * 300), wire.delete(b"b")], [wire.read(b"a", keys_only=True)])
    assert mine == inner.SerializeToString()
    outer = pb.TxnRequest(success=[pb.RequestOp(request_txn=inner)] * 3 + [
        pb.RequestOp(request_put=pb.PutRequest(key=b"last"))])
    assert wire.txn([], [wire.nested(mine)] * 3 + [wire.put(b"last")]) == outer.SerializeToString()
    assert wire.txn([], []) == pb.TxnRequest().SerializeToString()
