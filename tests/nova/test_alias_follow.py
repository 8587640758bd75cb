"""The Nova seam reads ``[pci] alias`` at each request, as Nova's API does when it turns a flavor's
``pci_passthrough:alias`` into PCI requests: an alias defined after the scheduler started (Nova's functional tests
set it with ``self.flags`` in the test body: test_pci_in_placement's RC and trait aliases, its one-time-use tests)
is known to the next decision, not "not defined"; one that does not parse is refused naming the option, and the
aliases the scheduler had stay. It is followed by the same follower as every option Nova reads per request
(``RequestOptions``, ``gantt.config.per_request.PER_REQUEST``), with ``[scheduler] max_attempts`` beside it."""

from __future__ import annotations

from pathlib import Path

from tests.nova.venv import python_or_skip
from tests.venvs import run_json

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def test_an_alias_defined_after_start_is_followed() -> None:
    out = run_json(python_or_skip(), HERE / "alias_follow_driver.py", {"src": str(SRC)}, timeout=300)
    assert out["start"] == [["a-pci"], False]  # nothing changed since the Config was read
    assert out["followed"] == [["a-gpu"], ['{"name": "a-gpu", "resource_class": "GPU", "traits": "purple"}'], 5,
                               True]
    for step in ("refused", "refused_again"):
        field, message = out[step]
        assert field == "pci.alias" and "four hexadecimal digits" in message
    assert out["kept"] == ["a-gpu"]
