"""Weighers, one module per family; importing this package registers them all. ``base`` states the contract;
``pipeline`` resolves ``weight_classes`` to the weighers in the order they run."""

from gantt.compute.weighers import base
from gantt.compute.weighers.base import WEIGHERS, Weigher, register
from gantt.compute.weighers.pipeline import ALL_WEIGHERS, resolve

__all__ = ["ALL_WEIGHERS", "WEIGHERS", "Weigher", "base", "register", "resolve"]
