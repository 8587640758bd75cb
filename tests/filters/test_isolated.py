from __future__ import annotations

import pytest

from tests.conftest import make_scheduler, passing, request

ISO = {"isolated_hosts": ["h0", "h1"], "isolated_images": ["iso-img"]}


def spec(image_id: str | None) -> dict:  # type: ignore[type-arg]
    return request(image={"id": image_id}) if image_id else request()


@pytest.mark.parametrize(("restrict", "image", "expected"), [
    (True, "iso-img", {"h0", "h1"}),
    (True, "other", {"h2", "h3"}),
    (True, None, {"h2", "h3"}),  # volume-backed: not an isolated image
    (False, "iso-img", {"h0", "h1"}),
    (False, "other", {"h0", "h1", "h2", "h3"}),
])
def test_result_matrix(restrict: bool, image: str | None, expected: set[str]) -> None:
    s = make_scheduler(4, filters=["IsolatedHostsFilter"],
                       filter_scheduler={**ISO, "restrict_isolated_hosts_to_isolated_images": restrict})
    assert passing(s, spec(image)) == expected


def test_no_isolated_images_keeps_isolated_hosts_free_when_restrictive() -> None:
    s = make_scheduler(3, filters=["IsolatedHostsFilter"], filter_scheduler={"isolated_hosts": ["h0"]})
    assert passing(s, spec("any")) == {"h1", "h2"}
    s = make_scheduler(3, filters=["IsolatedHostsFilter"],
                       filter_scheduler={"isolated_hosts": ["h0"], "restrict_isolated_hosts_to_isolated_images": False})
    assert passing(s, spec("any")) == {"h0", "h1", "h2"}


def test_new_isolated_host_is_seen_after_the_cache() -> None:
    s = make_scheduler(2, filters=["IsolatedHostsFilter"], filter_scheduler=ISO)
    assert passing(s, spec("iso-img")) == {"h0", "h1"}
    s.delete_host("h1")
    assert passing(s, spec("iso-img")) == {"h0"}
