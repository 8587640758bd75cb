"""A cold start's shortcuts keep what the per-host, per-report way gave: aggregate memberships shared per distinct
set (and their codes), traits interned per distinct list, addresses read in C at once (issue 35 item 2)."""
from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from typing import Any

import msgspec
import numpy as np

from gantt.bench.cloud import build_reports
from gantt.compute.state import reports as reports_module
from gantt.compute.state.aggregates import AggregateIndex
from gantt.compute.state.table import HostTable
from gantt.model import Aggregate

NOW = 1_000_000.0


def _no_cache(key: Hashable, build: Callable[[], Any]) -> Any:
    return build()


def test_aggregate_memberships_follow_every_change_and_hosts_in_the_same_aggregates_share_one_set() -> None:
    """A generated stream of aggregates added, replaced (hosts joining and leaving) and deleted: after each
    change every host's aggregate set (by its code) is the brute-force set of the aggregates naming it, and
    ``codes_of`` answers ``code_of`` per host. Hosts in the same aggregates hold one shared set (on main each
    host held a set of its own: a million of them at a cold start, each made into a frozenset to be interned)."""
    rng = random.Random(11)
    hosts = [f"h{i}" for i in range(300)]
    index = AggregateIndex(_no_cache)
    held: dict[str, list[str]] = {}
    for step in range(400):
        key = f"agg{rng.randrange(12)}"
        if key in held and rng.random() < 0.2:
            index.delete_aggregate(key)
            del held[key]
        else:
            members = rng.sample(hosts, rng.randrange(0, 120))
            index.update_aggregate(Aggregate(id=key, hosts=members))
            held[key] = members
        asked = [*hosts, "never-named"]
        codes = index.codes_of(asked)
        sets = index.sets()
        for host, code in zip(asked, codes, strict=True):
            want = frozenset(k for k, members in held.items() if host in members)
            assert sets[code] == want, (step, host)
            assert index.code_of(host) == code, (step, host)
        memberships = list(index._host_aggregates.values())
        assert all(isinstance(m, frozenset) for m in memberships)
        assert len({id(m) for m in memberships}) == len(set(memberships)), step


def test_codes_of_interns_new_sets_in_the_order_of_their_first_host() -> None:
    """One ``code_of`` per host in turn numbers the sets by their first host; ``codes_of`` numbers them alike
    (the table's aggregate-set codes are the same whichever way a load takes)."""
    index = AggregateIndex(_no_cache)
    index.update_aggregate(Aggregate(id="a", hosts=["h3", "h1"]))
    index.update_aggregate(Aggregate(id="b", hosts=["h2", "h1"]))
    codes = index.codes_of(["h0", "h2", "h1", "h3", "h2", "h9"])
    assert codes == [0, 1, 2, 3, 1, 0]
    assert index.sets()[1:] == [frozenset({"b"}), frozenset({"a", "b"}), frozenset({"a"})]


def test_a_bulk_load_interns_each_distinct_list_of_traits_once() -> None:
    """The benchmark's nodes list 2 distinct sets of traits: a cold start makes a frozenset and interns it once
    per distinct list, not once per node (a tenth of the load on main), and each row reads its own."""
    reports = build_reports(2000, 5)
    table = HostTable(clock=lambda: NOW, initial_rows=64)
    traitsets = table._columns.traitsets
    asked: list[frozenset[str]] = []
    code = traitsets.code

    def counted(value: frozenset[str]) -> int:
        asked.append(value)
        return code(value)

    traitsets.code = counted  # type: ignore[method-assign]  # counts the interner's calls on this table only
    table.load(reports, now=NOW)
    distinct = {frozenset(r.stats.traits or ()) for r in reports}
    assert len(asked) == len(distinct) == 2
    for row in range(table.n):
        want = frozenset(reports[row].stats.traits or ())
        assert traitsets.values[int(table._columns.cols["traits_code"][row])] == want


def test_addresses_read_at_once_are_read_as_one_by_one() -> None:
    """``_ipv4_ints`` reads a batch of strict dotted quads in C at once, and a batch holding anything else one by
    one: both as ``_ipv4_int`` reads each address."""
    rng = random.Random(5)
    strict = [".".join(str(rng.randrange(256)) for _ in range(4)) for _ in range(2000)]
    mixed = [*strict[:50], "01.2.3.4", "1.2.3", "not-an-ip", "", "1.2.3.4\x00", *strict[50:100]]
    for batch in (strict, mixed, []):
        assert list(reports_module._ipv4_ints(batch)) == [reports_module._ipv4_int(ip) for ip in batch]


def test_numbers_read_as_records_equal_the_array_of_tuples() -> None:
    """``_numbers_of`` reads the numbers every report names as records in C and sets the ones none names to NaN;
    a part where a number is named by some reports only is read value by value. Every way gives what the array
    of each report's tuple of numbers gives (None as NaN), bit for bit."""
    rng = random.Random(3)
    base = [r.stats for r in build_reports(300, 7)]
    parts: list[list[Any]] = [base, base[:1], base[:2]]
    for _ in range(30):
        part = [msgspec.structs.replace(s) for s in rng.sample(base, rng.randrange(1, 60))]
        for name in rng.sample(reports_module._NUMBERS, rng.randrange(0, 4)):
            everyone = rng.random() < 0.5
            for stats in part:
                if everyone or rng.random() < 0.3:
                    setattr(stats, name, None if rng.random() < 0.7 else rng.choice([0, 1.5, 2**60 + 1]))
        parts.append(part)
    for part in parts:
        want = np.array(list(map(reports_module._NUMBERS_OF, part)), dtype=np.float64)
        got = reports_module._numbers_of(part)
        assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.isnan(got), np.isnan(want))
