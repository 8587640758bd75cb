"""Placement's own functional suite against gantt serve on SQLite (tests/placement/gabbi_run.py), as a ratchet:
every test named in gabbi_passing.txt must pass; the totals are printed. A test that starts passing is added to
the list by ``python -m tests.placement.test_gabbi_conformance --update``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.placement import gabbi_run

PASSING = Path(__file__).with_name("gabbi_passing.txt")


def known() -> set[str]:
    return {line.strip() for line in PASSING.read_text().splitlines() if line.strip() and not line.startswith("#")}


def passing(results: list[gabbi_run.FileResult]) -> set[str]:
    return {f"{r.name}::{name}" for r in results for name in r.passed}


@pytest.mark.timeout(900)  # 79 files, a server each: ~2 minutes on 2 quiet cores, more on a loaded machine
def test_placement_gabbi_suite_ratchet(capsys) -> None:  # type: ignore[no-untyped-def]
    results = gabbi_run.run()
    errors = {r.name: r.error for r in results if r.error}
    total = gabbi_run.summary(results)
    with capsys.disabled():
        print(f"\nPlacement 16.0.0 gabbi suite on gantt serve: {total['passed']} passed, {total['failed']} failed "
              f"of {total['passed'] + total['failed']} in {total['files']} files")
    assert not errors, errors
    now = passing(results)
    lost = sorted(known() - now)
    assert not lost, f"{len(lost)} upstream tests that passed fail now:\n" + "\n".join(lost[:50])


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    found = passing(gabbi_run.run())
    PASSING.write_text("# Placement 16.0.0 gabbi tests that pass against gantt serve (file::test); see "
                       "test_gabbi_conformance.py\n" + "".join(f"{name}\n" for name in sorted(found)))
    print(f"{len(found)} passing tests written to {PASSING}")
