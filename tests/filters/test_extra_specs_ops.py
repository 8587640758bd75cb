from __future__ import annotations

import numpy as np
import pytest

from gantt.compute.filters.extra_specs_ops import parse


@pytest.mark.parametrize(("value", "req", "expected"), [
    ("4", "= 2", True), ("2", "= 2", True), ("1", "= 2", False),
    ("2", "== 2", True), ("2.0", "== 2", True), ("3", "== 2", False),
    ("3", "!= 2", True), ("2", "!= 2", False),
    ("3", ">= 2", True), ("1", ">= 2", False),
    ("1", "<= 2", True), ("3", "<= 2", False),
    ("abc", "s== abc", True), ("abd", "s== abc", False),
    ("abd", "s!= abc", True), ("abc", "s!= abc", False),
    ("abb", "s< abc", True), ("abc", "s< abc", False),
    ("abc", "s<= abc", True), ("abd", "s<= abc", False),
    ("abd", "s> abc", True), ("abc", "s> abc", False),
    ("abc", "s>= abc", True), ("abb", "s>= abc", False),
    ("['sse', 'avx2']", "<in> avx", True), ("['sse']", "<in> avx", False),
    ("aes mmx sse", "<all-in> aes mmx", True), ("aes sse", "<all-in> aes mmx", False),
    ("gpu", "<or> fpu <or> gpu", True), ("fpu", "<or> fpu <or> gpu", True), ("tpu", "<or> fpu <or> gpu", False),
    ("QEMU", "QEMU", True), ("kvm", "QEMU", False), ("two words", "two words", True),
    (None, "s== x", False), (None, "x", False),
    ("5", "<in>", False), ("5", ">=", False),
    ("not-a-number", ">= 2", False),
])
def test_every_operator(value: str | None, req: str, expected: bool) -> None:
    assert parse(req).matches(value) is expected


def test_or_skips_every_second_word_as_nova_does() -> None:
    # Nova pops a keyword between values without checking it
    assert parse("<or> a x b").matches("b")
    assert not parse("<or> a x b").matches("x")


@pytest.mark.parametrize("req", ["= abc", ">= x1", "<or>"])
def test_malformed_requirements_are_the_callers_error(req: str) -> None:
    with pytest.raises(ValueError):
        parse(req)


def test_numeric_mask_matches_scalar_semantics() -> None:
    values = np.array([0.0, 2.0, 5.0, np.nan])
    for req in ("= 2", "== 2", "!= 2", ">= 2", "<= 2"):
        r = parse(req)
        fast = r.numeric_mask(values)
        assert fast is not None
        slow = [r.matches(None if np.isnan(v) else str(int(v))) for v in values]
        assert fast.tolist() == slow, req
    assert parse("s== 2").numeric_mask(values) is None
