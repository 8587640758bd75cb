"""``[gantt] subset_slots`` / ``subset_slot``: instances sharing a store take their random pick of the best
``host_subset_size`` among the hosts of their own slot, so that they do not all claim the same few hosts."""

from __future__ import annotations

import zlib

import pytest

from gantt import InvalidRequest
from gantt.config import Config
from tests.conftest import make_scheduler, request

FILTERS = ["ComputeFilter"]


def slot_of(host: str, slots: int) -> int:
    return zlib.crc32(host.encode()) % slots


def first_pick(slot: int, slots: int, seed: int, hosts: dict[str, dict[str, int]] | int, subset: int) -> str:
    sched = make_scheduler(hosts, filters=FILTERS, filter_scheduler={"host_subset_size": subset},
                           gantt={"seed": seed, "subset_slot": slot, "subset_slots": slots})
    [[chosen, *_]] = sched.select_destinations(request())
    return chosen.host


def test_each_instance_picks_among_its_own_share_of_the_subset() -> None:
    hosts = [f"h{i}" for i in range(16)]
    assert {slot_of(h, 2) for h in hosts} == {0, 1}  # both slots own some of the subset
    for seed in range(12):
        for slot in (0, 1):
            assert slot_of(first_pick(slot, 2, seed, 16, 16), 2) == slot


def test_hosts_tied_with_the_subsets_last_weight_count_as_in_it() -> None:
    """Sixteen equal hosts, host_subset_size 2: Nova orders equal weights arbitrarily, so any two of them may form
    its subset. Each of four instances picks a host of its own slot, though the first two rows hold at most two."""
    for seed in range(6):
        for slot in range(4):
            assert slot_of(first_pick(slot, 4, seed, 16, 2), 4) == slot


def test_a_subset_of_one_still_spreads_over_the_hosts_tied_for_best() -> None:
    """host_subset_size 1 (Nova's default): Nova takes the first of the hosts tied for the best weight in its host
    manager's order, which is arbitrary; each slot takes one of its own."""
    for slot in range(4):
        assert slot_of(first_pick(slot, 4, 0, 16, 1), 4) == slot


def test_the_pick_stays_within_novas_subset_of_the_best() -> None:
    """Four big hosts and twelve small ones, host_subset_size 4: whatever the slot, the pick is a big one, even
    for a slot that owns none of the big ones (it then picks among all four, as Nova would)."""
    hosts = {f"h{i}": ({"memory_mb": 65536} if i < 4 else {"memory_mb": 8192}) for i in range(16)}
    big = {f"h{i}" for i in range(4)}
    slots = 4
    for seed in range(8):
        for slot in range(slots):
            assert first_pick(slot, slots, seed, hosts, 4) in big
    assert {slot_of(h, slots) for h in big} != set(range(slots))  # some slot owns no big host: the fallback ran


def test_one_slot_is_novas_uniform_pick() -> None:
    """The default: the pick ranges over the whole subset (both slots' hosts come up over a few seeds)."""
    picks = {first_pick(0, 1, seed, 16, 16) for seed in range(24)}
    assert {slot_of(h, 2) for h in picks} == {0, 1}


@pytest.mark.parametrize(("gantt", "subset", "message"), [
    ({"subset_slots": 0}, 4, "subset_slots must be >= 1"),
    ({"subset_slots": 2, "subset_slot": 2}, 4, "subset_slot must be from 0 to subset_slots - 1"),
    ({"subset_slots": 2, "subset_slot": -1}, 4, "subset_slot must be from 0"),
])
def test_bad_slots_are_refused_naming_the_option(gantt: dict[str, int], subset: int, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as err:
        Config.from_dict({"gantt": gantt, "filter_scheduler": {"host_subset_size": subset}})
    assert err.value.field is not None and err.value.field.startswith("$.gantt")


def test_each_worker_of_an_instance_takes_its_own_share_of_the_instances_slot() -> None:
    """``gantt serve --workers N``: each worker is a replica deciding on its own, so slot s of S becomes slot
    s + S * w of S * N for worker w (its share of the instance's hosts), with its own random draws; one worker
    is the instance's own config."""
    base = Config.from_dict({"gantt": {"subset_slots": 2, "subset_slot": 1, "seed": 7}})
    assert base.for_worker(0, 1) is base
    workers = [base.for_worker(w, 3) for w in range(3)]
    assert [(c.gantt.subset_slot, c.gantt.subset_slots, c.gantt.seed) for c in workers] == [
        (1, 6, 7), (3, 6, 8), (5, 6, 9)]
    assert (base.gantt.subset_slot, base.gantt.subset_slots) == (1, 2)  # the instance's own config is unchanged
    with pytest.raises(ValueError, match="worker 3 of 3"):
        base.for_worker(3, 3)
    # two workers of each of two instances: each worker picks among its own quarter of the hosts, which lies in
    # its instance's half
    for seed in range(6):
        for instance in range(2):
            one = Config.from_dict({"gantt": {"seed": seed, "subset_slots": 2, "subset_slot": instance}})
            for w in range(2):
                worker = one.for_worker(w, 2).gantt
                pick = first_pick(worker.subset_slot, worker.subset_slots, worker.seed or 0, 32, 32)
                assert slot_of(pick, 4) == instance + 2 * w and slot_of(pick, 2) == instance
