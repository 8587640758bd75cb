"""The instance index: which instances each node runs and on which host each instance is (the affinity filters
and weighers read it; Nova's update/sync_instance_info and a report's ``instances`` write it).

A node runs what its host lists (in a report or through instance info) and what is allocated on it: an
allocation's consumer is added when it is placed and stays until it is released, unless the node's report lists
it too. ``held`` arguments name the consumers that hold an allocation: those stay wherever their allocation is,
whatever a host's list says.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from collections.abc import Set as AbstractSet

_NONE: frozenset[str] = frozenset()  # the instances of a node that runs none (an empty set() costs 216 bytes a row)


class InstanceIndex:
    def __init__(self) -> None:
        # row-aligned with the table's columns: a node's own set, or _NONE (shared) while it runs nothing
        self._instances: list[set[str] | frozenset[str]] = []
        self._reported_instances: list[frozenset[str]] = []  # row-aligned: what the node's last report listed
        self._instance_host: dict[str, str] = {}
        # per host, what Nova's instance info (update/sync_instance_info) lists: an instance runs there whatever
        # happens to its allocation (a move re-keys it to the migration while the instance stays on its source)
        self._info: dict[str, set[str]] = {}

    # ------------------------------------------------------------------------------------------- reading

    def instances(self, row: int) -> AbstractSet[str]:
        return self._instances[row]

    def reported_instances(self, row: int) -> frozenset[str]:
        return self._reported_instances[row]

    def instance_host(self, uuid: str) -> str | None:
        return self._instance_host.get(uuid)

    # ---------------------------------------------------------------------------------------------- rows

    def add_row(self) -> None:
        self._instances.append(_NONE)
        self._reported_instances.append(_NONE)

    def add_rows(self, count: int) -> None:
        self._instances.extend([_NONE] * count)
        self._reported_instances.extend([_NONE] * count)

    def remove_row(self, row: int, last: int, host: str) -> None:
        """The table removed ``row`` of ``host`` and moved ``last`` into its place."""
        for uuid in self._instances[row]:
            if self._instance_host.get(uuid) == host:
                self._instance_host.pop(uuid, None)
        self._instances[row] = self._instances[last]
        self._instances.pop()
        self._reported_instances[row] = self._reported_instances[last]
        self._reported_instances.pop()

    # ------------------------------------------------------------------------------------------- writing

    def add(self, row: int, uuids: Iterable[str]) -> None:
        held = self._instances[row]
        if isinstance(held, set):  # the node's own set (else _NONE, shared by every node that runs nothing)
            held |= set(uuids)
        else:
            fresh = set(uuids)
            if fresh:
                self._instances[row] = fresh

    def discard(self, row: int, uuid: str) -> None:
        held = self._instances[row]
        if isinstance(held, set) and uuid in held:  # (_NONE holds nothing)
            held.discard(uuid)
            if not held:
                self._instances[row] = _NONE

    def place(self, row: int, host: str, uuid: str) -> None:
        """An allocation's consumer now runs on ``row`` of ``host``."""
        self.add(row, (uuid,))
        self._instance_host[uuid] = host

    def unplace(self, row: int, host: str, uuid: str) -> None:
        """An allocation on ``row`` of ``host`` was dropped: its consumer goes, unless the node's report or the
        host's instance info lists it."""
        if uuid not in self._reported_instances[row] and uuid not in self._info.get(host, _NONE):
            self.discard(row, uuid)
            if self._instance_host.get(uuid) == host:
                del self._instance_host[uuid]

    def report(self, row: int, host: str, instances: Iterable[str], held: Container[str]) -> frozenset[str]:
        """A report of ``row`` lists ``instances`` (a full replacement of its last list); returns them as a set."""
        reported = frozenset(instances)
        for gone in self._reported_instances[row] - reported:
            if gone not in held:
                if self._instance_host.get(gone) == host:
                    del self._instance_host[gone]
                self.discard(row, gone)
        for uuid in reported:
            self._instance_host[uuid] = host
        self.add(row, reported)
        self._reported_instances[row] = reported
        return reported

    def set_instances(self, host: str, rows: AbstractSet[int], instances: Iterable[str], *, replace: bool,
            held: Container[str]) -> None:
        """Nova's update (``replace=False``) or sync (``replace=True``) of what ``host`` (its ``rows``) runs."""
        new = set(instances)
        if not replace:
            self._info.setdefault(host, set()).update(new)
        else:
            self._info[host] = set(new)
            for r in rows:
                for uuid in self._instances[r] - new:
                    if uuid not in held and self._instance_host.get(uuid) == host:
                        del self._instance_host[uuid]
                kept = {u for u in self._instances[r] if u in new or u in held}
                self._instances[r] = kept or _NONE
        self.add(min(rows), new)
        for uuid in new:
            self._instance_host[uuid] = host

    def delete_instance(self, host: str, rows: AbstractSet[int], uuid: str) -> bool:
        """``host`` no longer runs ``uuid``; whether any of its rows did."""
        self._info.get(host, set()).discard(uuid)
        found = False
        for r in rows:
            if uuid in self._instances[r]:
                self.discard(r, uuid)
                found = True
        if found and self._instance_host.get(uuid) == host:
            del self._instance_host[uuid]
        return found
