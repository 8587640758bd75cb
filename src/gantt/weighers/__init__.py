"""Weighers, one module per family; importing this package registers them all (see ``base.register``)."""

from gantt.weighers import base
from gantt.weighers.base import WEIGHERS, Weigher, register, resolve

from gantt.weighers import affinity, build_failure, hypervisor, load, metrics, resources  # noqa: F401  isort: skip

__all__ = ["WEIGHERS", "Weigher", "base", "register", "resolve"]
