"""Namespaces: one Gantt service holding the state of several services' hosts, each partition apart.

A namespace is a name and a *kind*: ``compute`` (Nova's hosts, today's Gantt) or ``volume`` (Cinder's pools,
``gantt.volume``). The namespace ``compute`` of kind compute is the default: its store tables and keys, its API
paths and its behaviour are those Gantt had before namespaces existed. Any other namespace exists only when the
configuration declares it (``[namespace.<name>]``; see ``gantt.config``).

How a namespace is kept apart, per store backend (each namespace is its own ``Store`` object, so the replica, the
engine and the feed need not know namespaces at all):
- memory: one store object per namespace;
- SQLite: the same file, the namespace's own tables (``"ns:<name>:hosts"``, …), with their own revision counter
  and change feed;
- etcd: the namespace's own key prefix beside the default one (``<prefix>~ns/<name>/``, outside ``<prefix>/``, so
  the default namespace's snapshot and watch never see it), watched on its own.
"""

from __future__ import annotations

import re
from typing import Literal

from gantt.model.errors import NotFound

DEFAULT = "compute"
Kind = Literal["compute", "volume"]
KINDS: tuple[Kind, ...] = ("compute", "volume")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def check_name(name: str) -> str:
    """``name`` if it can name a namespace (a lower-case letter, then up to 31 of ``a-z0-9_-``), else ValueError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"namespace name {str(name)[:64]!r} must match {_NAME.pattern} (a lower-case letter, then "
                         "up to 31 lower-case letters, digits, '_' or '-')")
    return name


class UnknownNamespace(NotFound):
    """A request named a namespace the service does not serve."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"no namespace {name[:64]!r} here (this service serves: {', '.join(known)})",
                         field="namespace")
        self.namespace = name


def sqlite_table(namespace: str, table: str) -> str:
    """The SQL name (quoted) of a namespace's table or index; the default namespace keeps the bare names."""
    return table if namespace == DEFAULT else f'"ns:{namespace}:{table}"'


def etcd_prefix(prefix: str, namespace: str) -> str:
    """The key prefix of a namespace under a store prefix (``/gantt``): the default keeps the prefix itself."""
    return prefix if namespace == DEFAULT else f"{prefix}~ns/{namespace}"
