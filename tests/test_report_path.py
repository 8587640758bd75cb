"""The host-report path's shortcuts: each one gives what the long way gave.

- ``merge_reports`` keeps the record's own stats when a report repeats them (no rebuilt copy to validate again),
  and merges field by field otherwise;
- ``check_depth`` stacks only containers, and still refuses JSON one level deeper than MAX_DEPTH, however mixed;
- a replica's cursor (what ``sync`` waits for) passes a revision only once every change of it is applied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from gantt.config import Config
from gantt.model import MAX_DEPTH, HostReport, HostStats, check_depth, merge_reports
from gantt.replication.replica import Replica
from gantt.store.base import Change
from gantt.store.memory import MemoryStore
from gantt.store.sqlite import SQLiteStore
from tests.conftest import host_stats

CONFIG = Config.from_dict({"DEFAULT": {"service_down_time": 60.0}})


def _report(stats: dict[str, Any], at: float) -> HostReport:
    return HostReport(host="h", stats=msgspec.convert(stats, HostStats), reported_at=at)


def _nested(depth: int, kinds: str) -> Any:
    """JSON ``depth`` containers deep, the kinds cycling through ``kinds`` ("d": an object, "l": an array)."""
    value: Any = 1
    for level in range(depth):
        value = {"k": value, "flat": 2} if kinds[level % len(kinds)] == "d" else ["x", value, 3]
    return value


@pytest.mark.parametrize("kinds", ["d", "l", "dl", "ldd"])
def test_depth_is_refused_one_level_past_the_bound_and_taken_at_it(kinds: str) -> None:
    check_depth("cpu_info", _nested(MAX_DEPTH, kinds))
    with pytest.raises(ValueError, match=f"at most {MAX_DEPTH} levels"):
        check_depth("cpu_info", _nested(MAX_DEPTH + 1, kinds))
    # a deep branch behind a shallow one is found too
    with pytest.raises(ValueError):
        check_depth("stats", {"a": 1, "b": [1, 2], "c": _nested(MAX_DEPTH, kinds)})
    check_depth("stats", 5)
    check_depth("stats", None)


def test_a_repeated_report_keeps_the_records_stats_and_a_partial_one_merges() -> None:
    old = _report(host_stats(vcpus_used=2, num_io_ops=1, cpu_info={"arch": "x86_64"}), 10.0)
    same = _report(host_stats(vcpus_used=2, num_io_ops=1, cpu_info={"arch": "x86_64"}), 20.0)
    merged = merge_reports(old, same)
    assert merged is not None and merged.stats is old.stats and merged.reported_at == 20.0
    # a report naming less: what it leaves out is kept, what it names replaces
    partial = HostReport(host="h", stats=HostStats(vcpus_used=5), reported_at=30.0)
    merged = merge_reports(old, partial)
    assert merged is not None and merged.stats.vcpus_used == 5 and merged.stats.num_io_ops == 1
    assert merged.stats.cpu_info == {"arch": "x86_64"}
    # equal except for one field a report always names: not the old stats
    moved = _report(host_stats(vcpus_used=2, num_io_ops=2, cpu_info={"arch": "x86_64"}), 40.0)
    merged = merge_reports(old, moved)
    assert merged is not None and merged.stats.num_io_ops == 2


def test_a_changed_report_after_identical_ones_is_applied_on_both_replicas(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/gantt.sqlite"
    now = [1000.0]
    with SQLiteStore(url) as first, SQLiteStore(url) as second:
        a = Replica(first, CONFIG, clock=lambda: now[0]).start(follow=False)
        b = Replica(second, CONFIG, clock=lambda: now[0]).start(follow=False)
        try:
            stats = host_stats(vcpus_used=2, num_io_ops=1)
            for _ in range(3):
                now[0] += 20.0
                a.update_resource_stats("h1", stats)
            assert a.touches == 2
            now[0] += 20.0
            a.update_resource_stats("h1", {**stats, "num_io_ops": 3, "vcpus_used": 4})
            b.sync()
            for replica in (a, b):
                row = replica.table.row("h1", "h1")
                assert replica.table.col("num_io_ops")[row] == 3
            assert {h.host: h.stats.vcpus_used for h in first.snapshot().hosts} == {"h1": 4}
            assert a.touches == 2
        finally:
            a.stop()
            b.stop()


def test_the_long_digit_scan_finds_what_the_regex_finds() -> None:
    """``_long_digits`` (a translate and a substring search) says exactly what ``\\d{19}`` said of a body: runs
    of 18, 19 and 20 digits, at either end, beside the digit-like bytes around them and non-ASCII digits."""
    import random
    import re

    from gantt.service.runtime import _long_digits

    regex = re.compile(rb"\d{19}")
    rng = random.Random(7)
    alphabet = b'0123456789999:/ ,"{}[]-+.eE' + "٣²".encode()
    cases = [b"", b"1" * 18, b"9" * 19, b"x" + b"0" * 19, b"1" * 20 + b"x", b'{"a": 1234567890123456789}',
             b'{"a": 123456789012345678}', "٣".encode() * 19, b"1" * 18 + "٣".encode() + b"1"]
    cases += [bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 80))) for _ in range(3000)]
    cases += [b"x" * rng.randrange(0, 5) + b"7" * rng.randrange(15, 22) + b"x" for _ in range(200)]
    for body in cases:
        assert _long_digits(body) == (regex.search(body) is not None), body


def test_the_cursor_passes_a_revision_once_all_its_changes_are_applied() -> None:
    """``sync`` reads ``revision`` without the table lock: had it moved at a revision's first change, a caller
    would go on (decide) while the feed thread was still adding that revision's other rows."""
    replica = Replica(MemoryStore(), CONFIG)
    seen: list[tuple[str, int]] = []
    put = replica.providers.put

    def watching(record: HostReport) -> None:
        seen.append((record.host, replica.revision))
        put(record)

    replica.providers.put = watching  # type: ignore[method-assign]
    hosts = [HostReport(host=f"h{k}", stats=msgspec.convert(host_stats(), HostStats), reported_at=1.0)
             for k in range(4)]
    replica.apply([Change(revision=7, kind="host", host=hosts[0]), Change(revision=7, kind="host", host=hosts[1]),
                   Change(revision=8, kind="host", host=hosts[2]), Change(revision=8, kind="host", host=hosts[3])])
    assert seen == [("h0", 0), ("h1", 0), ("h2", 7), ("h3", 7)]
    assert replica.revision == 8 and len(replica.table) == 4


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_number_changing_type_in_free_form_json_is_written_not_taken_for_a_repeat(tmp_path: Path,
                                                                                    backend: str) -> None:
    """``46`` and ``46.0`` are equal to Python but not to ComputeCapabilitiesFilter, which matches their text: a
    host whose cpu_info moves from one to the other has changed, and the store must keep the new figure (it kept
    the old one and wrote a touch)."""
    store = MemoryStore() if backend == "memory" else SQLiteStore(f"sqlite:///{tmp_path}/gantt.sqlite")
    now = [1000.0]
    replica = Replica(store, CONFIG, clock=lambda: now[0]).start(follow=False)
    try:
        first = host_stats(uuid="u-h", cpu_info={"arch": "x86_64", "maxphysaddr": {"bits": 46}}, stats={"load": 1})
        replica.update_resource_stats("h", first)
        stats = dict(first)
        for field, value in (("cpu_info", {"arch": "x86_64", "maxphysaddr": {"bits": 46.0}}),
                             ("stats", {"load": 1.0})):
            now[0] += 20.0
            stats[field] = value
            replica.update_resource_stats("h", stats)
            [held] = store.snapshot().hosts
            assert msgspec.json.encode(getattr(held.stats, field)) == msgspec.json.encode(value)
            assert msgspec.json.encode(getattr(replica.providers.by_key[("h", "h")].record.stats, field)) \
                == msgspec.json.encode(value)
        assert replica.touches == 0
        now[0] += 20.0
        replica.update_resource_stats("h", stats)
        assert replica.touches == 1  # the same figures of the same types again: a repeat
    finally:
        replica.stop()
        store.close()


def _reference_same_json(a: Any, b: Any) -> bool:
    """``_same_json`` as it was written first (a generator per container): the cheaper loop must say the same."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return all(_reference_same_json(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return all(_reference_same_json(x, y) for x, y in zip(a, b, strict=True))
    return True


class _Dict(dict[str, Any]):
    pass


def _json(rng: Any, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return rng.choice([1, 1.0, True, False, 0, 0.0, None, "1", "x", 46, 46.0])
    if roll < 0.75:
        return [_json(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    items = {f"k{i}": _json(rng, depth + 1) for i in range(rng.randrange(0, 4))}
    return _Dict(items) if rng.random() < 0.1 else items


def _retyped(rng: Any, value: Any) -> Any:
    """An equal value with, now and then, a number or container of another type (46 -> 46.0, 1 -> True, a dict
    -> its subclass)."""
    if isinstance(value, dict):
        out = {key: _retyped(rng, item) for key, item in value.items()}
        return _Dict(out) if rng.random() < 0.05 else out
    if isinstance(value, list):
        return [_retyped(rng, item) for item in value]
    if rng.random() < 0.1 and type(value) in (int, float, bool) and value in (0, 1, 46):
        return rng.choice([t(value) for t in (int, float, bool) if t(value) == value])
    return value


def test_the_type_comparison_of_free_form_json_says_what_the_first_one_said() -> None:
    import random

    from gantt.model.hosts import _same_json

    rng = random.Random(11)
    differ = 0
    for _ in range(4000):
        a = _json(rng, 0)
        b = _retyped(rng, a)
        assert a == b
        expected = _reference_same_json(a, b)
        assert _same_json(a, b) is expected, (a, b)
        differ += not expected
    assert 200 < differ < 3800  # both answers were asked for, many times


def test_a_report_repeats_its_record_as_the_merge_would_say() -> None:
    """``repeated_by`` (no merge built when the report names the record's stats exactly) answers as
    ``repeats(old, merge_reports(old, report))``: same figures at another time, the same at the same time or with
    no time, a moved figure, a partial report, a number's type, a provider."""
    from gantt.model import Provider, repeated_by, repeats

    base = host_stats(vcpus_used=2, num_io_ops=1, cpu_info={"arch": "x86_64", "bits": 46}, stats={"k": "1"})
    old = _report(base, 10.0)
    provider = Provider(uuid="u", name="h")
    cases = [_report(base, 20.0), _report(base, 10.0), HostReport(host="h", stats=old.stats),
             _report({**base, "num_io_ops": 2}, 20.0),
             HostReport(host="h", stats=HostStats(vcpus_used=2), reported_at=20.0),
             HostReport(host="h", stats=HostStats(vcpus_used=3), reported_at=20.0),
             _report({**base, "cpu_info": {"arch": "x86_64", "bits": 46.0}}, 20.0),
             HostReport(host="h", stats=old.stats, reported_at=20.0, provider=provider)]
    answers = []
    for report in cases:
        expected = repeats(old, merge_reports(old, report))
        assert repeated_by(old, report) is expected, report
        answers.append(expected)
    assert answers == [True, False, False, False, True, False, False, False]
    # generated: reports naming a random part of the record, now and then a field moved or retyped
    import random

    rng = random.Random(5)
    inventory = {"total": 64, "reserved": 4, "min_unit": 1, "max_unit": 16, "step_size": 1, "allocation_ratio": 2.0}
    full = {**base, "inventories": {"VCPU": inventory, "CUSTOM_X": {**inventory, "total": 8}},
            "metrics": [{"name": "cpu.percent", "value": 3.0}], "service": {"disabled": False}}
    moves = {"vcpus_used": 3, "num_io_ops": 7, "cpu_info": {"arch": "x86_64", "bits": 46.0}, "stats": {"k": 1},
             "metrics": [{"name": "cpu.percent", "value": 4.0}], "service": {"disabled": True},
             "inventories": {"VCPU": {**inventory, "reserved": 5}}, "host_ip": "10.0.0.9"}
    for held_inventories in (True, False):
        held = dict(full) if held_inventories else {k: v for k, v in full.items() if k != "inventories"}
        record = _report(held, 10.0)
        for _ in range(400):
            named = {k: v for k, v in full.items() if rng.random() < 0.5}
            if "inventories" in named and rng.random() < 0.5:
                named["inventories"] = {"CUSTOM_X": full["inventories"]["CUSTOM_X"]}  # one class of two
            if rng.random() < 0.4:
                field = rng.choice(list(moves))
                named[field] = moves[field]
            report = HostReport(host="h", stats=msgspec.convert(named, HostStats), reported_at=20.0)
            expected = repeats(record, merge_reports(record, report))
            assert repeated_by(record, report) is expected, named
            answers.append(expected)
    assert 300 < answers.count(True) < 700
    unstamped = HostReport(host="h", stats=old.stats)
    assert not repeated_by(unstamped, _report(base, 20.0)) and not repeats(unstamped, merge_reports(unstamped,
                                                                                                 _report(base, 20.0)))


@pytest.mark.parametrize("kinds", ["d", "l", "dl"])
def test_free_form_json_is_refused_one_level_past_the_bound_however_it_is_checked(kinds: str) -> None:
    """``check_json`` walks a value only when its encoding opens more than MAX_DEPTH containers: the answers are
    the walk's, at the bound, past it, far past it (deeper than the encoder goes), with brackets inside strings,
    wide and shallow, and in a value that is no JSON at all."""
    from gantt.model import check_json

    check_json("cpu_info", _nested(MAX_DEPTH, kinds))
    for depth in (MAX_DEPTH + 1, 5000):
        with pytest.raises(ValueError, match=f"at most {MAX_DEPTH} levels"):
            check_json("cpu_info", _nested(depth, kinds))
    check_json("stats", {"a": "[[[[" * 40, "b": "{" * 100})  # brackets in strings nest nothing
    check_json("stats", {f"k{i}": [{"x": [1]}] for i in range(50)})  # 150 containers, 4 deep: walked, taken
    with pytest.raises(ValueError, match="JSON values only"):
        check_json("stats", {"a": object()})
    with pytest.raises(ValueError, match=f"at most {MAX_DEPTH} levels"):
        check_json("stats", {"a": object(), "b": _nested(MAX_DEPTH + 1, kinds)})
    for value in ({}, [], None, 0, ""):
        check_json("stats", value)
    with pytest.raises(ValueError, match="bytes of JSON"):
        check_json("stats", {"a": "x" * (128 * 1024)})
