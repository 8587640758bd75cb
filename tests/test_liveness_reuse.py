"""The liveness mask is handed out again, not copied, while no node changes sides (``journal.Liveness``), and
ComputeFilter keeps its AND with the service flags for as long as that mask is the same object. Decisions must be
those of a table that compares every report time afresh, while nodes stop reporting, come back, and the clock
moves past ``service_down_time``, and services are disabled and enabled."""

from __future__ import annotations

import random

import numpy as np

from gantt import NoValidHost
from tests.conftest import FakeClock, request
from tests.test_block_pick import HOSTS, _cloud


def test_decisions_with_the_kept_liveness_equal_those_with_a_fresh_one() -> None:
    clocks = (FakeClock(), FakeClock())
    kept, fresh = _cloud(clocks[0], 4, blocks=False), _cloud(clocks[1], 4, blocks=False)
    # the reference compares every report time afresh (a new mask each decision; nothing else differs)
    fresh.table.derived._liveness.get = lambda updated_at, cutoff, *, n, **_: updated_at[:n] >= cutoff  # type: ignore
    (compute,) = [f for f in fresh.engine.ranker.filters if f.name == "ComputeFilter"]
    compute.mask = lambda table, ctx: table.alive(ctx.now) & ~(  # type: ignore[method-assign]
        table.col("disabled") | table.col("forced_down"))
    rng = random.Random(4)
    reused = decided = saw_down = 0
    last = None
    for step in range(260):
        op = rng.random()
        if op < 0.6:
            uuids = [f"c{step}"]
            spec = request(rng.choice([1, 4, 16]), rng.choice([2048, 8192]), 20, project_id="p1",
                           instance_uuids=uuids)
            answers = []
            for sched in (kept, fresh):
                try:
                    answers.append([[(s.host, s.weight) for s in alts] for alts in sched.select_destinations(spec)])
                except NoValidHost as exc:
                    answers.append(str(exc))
            assert answers[0] == answers[1], f"step {step}"
            decided += not isinstance(answers[0], str)
            alive = kept.table.alive()
            reused += alive is last
            last = alive
            saw_down += 0 < int(np.count_nonzero(~alive)) < HOSTS
        elif op < 0.75:  # most nodes report again, the others age
            rows = np.array(sorted(rng.sample(range(HOSTS), rng.choice([2990, 2900, 1500]))))
            for sched, clock in zip((kept, fresh), clocks, strict=True):
                sched.table.heartbeat(rows, clock.now)
        elif op < 0.78:  # a service disabled or enabled again (the filter's other part moves)
            host, off = f"h{rng.randrange(0, HOSTS, 3)}", rng.random() < 0.7
            for sched in (kept, fresh):
                sched.update_resource_stats(host, {"service": {"disabled": off}})
        elif op < 0.85:  # a few reports: live nodes stay live, a down one comes back
            for _ in range(rng.randrange(1, 8)):
                host, used = f"h{rng.randrange(HOSTS)}", rng.randrange(0, 4)
                for sched in (kept, fresh):
                    sched.update_resource_stats(host, {"vcpus_used": used})
        else:
            seconds = rng.choice([5.0, 30.0, 61.0])
            for clock in clocks:
                clock.advance(seconds)
    assert decided > 100
    assert reused > 40  # the kept mask was handed out again across decisions (claims between them)
    assert saw_down > 20  # decisions met some nodes down and others up: the filter had something to decide
