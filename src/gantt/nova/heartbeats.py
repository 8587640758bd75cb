"""The periodic pass's heartbeats: the nodes whose report did not change since the cell reader last took it are
alive, and the replica's liveness batch takes them as touches, written as one batch for all (``Replica.heartbeat``,
``flush_liveness``).

The long way for a node (``report_batch``: its merges; ``heartbeat``: the merge into the record, then the
comparison of the two) cost ~0.1-0.2 ms a node, ~1-2 s a pass at 10,000 nodes. A node whose record still holds
the very stats object its last heartbeat repeated (any write of the record since, but a touch, replaced it), while
the reader's report is the one that heartbeat was made from, repeats it again: taken by that token, as the HTTP
face takes a report whose bytes repeat (``heartbeat(report, stats)``: an identity check, a few µs). A node without
a token, or whose token no longer holds, takes the long way once, which gives it one.
"""

from __future__ import annotations

from typing import Any

from gantt.model import HostReport, HostStats, NodeKey


class Heartbeats:
    """Per node: the reader's report its last heartbeat repeated, and the record's stats that heartbeat found."""

    def __init__(self) -> None:
        self._tokens: dict[NodeKey, tuple[HostReport, HostStats]] = {}

    def beat(self, replica: Any, reports: list[HostReport]) -> int:
        """Take ``reports`` (the reader's own, unstamped) as heartbeats, or write those whose record differs;
        then write what was taken, as one batch. Returns how many took the long way."""
        now, tokens, slow = replica.clock(), self._tokens, 0
        for report in reports:
            key = (report.host, report.nodename)
            token = tokens.get(key)
            # ``is`` first: the reader keeps the report object it holds while the node's row does not change
            if token is not None and (token[0] is report or token[0] == report):
                again = HostReport(host=report.host, node=report.node, stats=token[1], reported_at=now)
                if replica.heartbeat(again, token[1]) is not None:
                    continue
            slow += 1
            stamped = replica.report_batch(HostReport(host=report.host, node=report.node, stats=report.stats))
            repeated = replica.heartbeat(stamped.reports[0])
            if repeated is None:
                tokens.pop(key, None)
                replica.report(stamped.reports[0])
            else:
                tokens[key] = (report, repeated)
        replica.flush_liveness()
        return slow

    def forget(self, key: NodeKey) -> None:
        """The node is gone from its cell."""
        self._tokens.pop(key, None)
