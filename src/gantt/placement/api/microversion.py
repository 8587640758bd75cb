"""Placement's microversions: ``OpenStack-API-Version: placement X.Y`` (or ``latest``), 1.0 when absent."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from gantt.placement.api.errors import PlacementError

SERVICE = "placement"
MIN = (1, 0)
MAX = (1, 39)  # Placement 16.0.0's newest
_VERSION = re.compile(r"^(\d+)\.(\d+)$")


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int

    def at_least(self, minor: int) -> bool:
        """This version is 1.``minor`` or newer."""
        return (self.major, self.minor) >= (1, minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


MIN_VERSION = Version(*MIN)
MAX_VERSION = Version(*MAX)


def negotiate(headers: list[tuple[bytes, bytes]]) -> Version:
    """The version a request asks for: 400 for a malformed one, 406 for one this server does not serve."""
    given = tuple(value for name, value in headers if name.lower() == b"openstack-api-version")
    return _negotiated(given)


@functools.lru_cache(maxsize=256)
def _negotiated(given: tuple[bytes, ...]) -> Version:
    """The header's values as a version: the same few arrive on every request (a refusal is not cached)."""
    wanted = _wanted([(b"openstack-api-version", value) for value in given])
    if wanted is None:
        return MIN_VERSION
    if wanted == "latest":
        return MAX_VERSION
    match = _VERSION.match(wanted)
    if match is None:
        raise PlacementError(400, f"invalid version string: {wanted}")
    version = Version(int(match.group(1)), int(match.group(2)))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise PlacementError(406, f"Unacceptable version header: {wanted}", versions=True)
    return version


def _wanted(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The placement entry of OpenStack-API-Version (several services may be named, comma-separated)."""
    for name, value in headers:
        if name.lower() != b"openstack-api-version":
            continue
        for part in value.decode("latin-1").split(","):
            service, _, version = part.strip().partition(" ")
            if service.lower() == SERVICE:
                return version.strip().lower()
    return None
