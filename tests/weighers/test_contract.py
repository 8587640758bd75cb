"""A weigher that could not weigh is refused when it registers, not at the first decision that uses it."""

from __future__ import annotations

import pytest

from gantt.compute.weighers import WEIGHERS
from gantt.compute.weighers.base import Weigher, register


def test_a_multiplier_option_that_is_not_an_option_is_refused() -> None:
    with pytest.raises(TypeError, match="not a \\[filter_scheduler\\] option"):
        register(type("NoOption", (Weigher,), {"name": "NoOption", "usage_column": "vcpus_used"}))
    with pytest.raises(TypeError, match="'ram_weight_multipler'"):
        register(type("Typo", (Weigher,), {"name": "Typo", "usage_column": "vcpus_used",
                                           "multiplier_option": "ram_weight_multipler"}))
    assert "NoOption" not in WEIGHERS and "Typo" not in WEIGHERS


def test_a_weigher_without_values_is_refused() -> None:
    with pytest.raises(TypeError, match="neither raw\\(\\) nor a usage_column"):
        register(type("NoValues", (Weigher,), {"name": "NoValues", "multiplier_option": "ram_weight_multiplier"}))
    assert "NoValues" not in WEIGHERS


def test_every_registered_weigher_has_a_multiplier_and_values() -> None:
    for cls in WEIGHERS.values():
        assert cls.multiplier is not Weigher.multiplier or cls.multiplier_option, cls.name
        assert cls.raw is not Weigher.raw or cls.usage_column, cls.name
