from __future__ import annotations

from collections.abc import Callable

import pytest

from gantt.store.base import Store
from gantt.store.memory import MemoryStore
from tests.store.contract import CONTRACT


@pytest.mark.parametrize("check", CONTRACT, ids=lambda f: f.__name__)
def test_memory_store_contract(check: Callable[[Store], None]) -> None:
    check(MemoryStore())
