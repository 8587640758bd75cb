"""Request ids (OpenStack's ``req-<uuid>`` form) and uuids: unique within a process and across forked workers."""

from __future__ import annotations

import os
import re
import uuid

from gantt.base.ids import new_uuid, request_id

FORM = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_ids_are_version_4_uuids_and_unique() -> None:
    ids = [request_id() if k % 2 else f"req-{new_uuid()}" for k in range(50_000)]  # one sequence for both
    assert len(set(ids)) == len(ids)
    for made in ids[:100]:
        assert FORM.fullmatch(made), made
        parsed = uuid.UUID(made[4:])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_forked_child_draws_its_own() -> None:
    """Workers forked from one parent would otherwise count from the same point and repeat each other's ids."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, request_id().encode())
        os._exit(0)
    os.close(write)
    theirs = os.read(read, 100).decode()
    os.waitpid(pid, 0)
    os.close(read)
    ours = request_id()
    assert FORM.fullmatch(theirs)
    assert theirs[:23] != ours[:23]  # the per-process half differs
