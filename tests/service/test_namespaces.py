"""Namespaces on the SQLite store: two in one ``gantt serve`` (one file) never leak into each other."""

from __future__ import annotations

from pathlib import Path

from tests.namespaces import check_feeds, check_isolation


def test_two_namespaces_in_one_service_are_isolated(tmp_path: Path) -> None:
    check_isolation(f"sqlite:///{tmp_path}/gantt.sqlite")


def test_each_namespace_has_its_own_feed(tmp_path: Path) -> None:
    check_feeds(f"sqlite:///{tmp_path}/gantt.sqlite")
