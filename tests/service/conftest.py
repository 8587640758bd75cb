"""One real ``gantt serve`` per test session (per xdist worker), reached over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gantt.client import SchedulerClient
from tests.service.server import ServerProcess

TOKEN = "test-token-0123456789"
MAX_BODY = 64 * 1024

CONFIG: dict[str, Any] = {
    "filter_scheduler": {"enabled_filters": ["ComputeFilter", "AvailabilityZoneFilter"]},
    # Hosts registered at the start of the session must not go "down" while the session runs.
    "DEFAULT": {"service_down_time": 86400},
    "gantt": {"max_body_bytes": MAX_BODY, "seed": 7},
}


def _store(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        import gantt.store.sqlite  # noqa: F401
    except ImportError:
        return "memory://"
    return f"sqlite:///{tmp_path_factory.mktemp('store')}/gantt.sqlite"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(_store(tmp_path_factory), config=CONFIG,
                       workdir=tmp_path_factory.mktemp("server")) as process:
        yield process


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A second server with a bearer token."""
    with ServerProcess("memory://", config=CONFIG, token=TOKEN, workdir=tmp_path_factory.mktemp("secured")) as p:
        yield p


@pytest.fixture
def client(server: ServerProcess) -> Iterator[SchedulerClient]:
    with server.client() as c:
        yield c
