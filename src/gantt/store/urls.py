"""Store URLs: the backend a URL names (``open_store``, the one place that knows every backend), and a URL fit to
show. Above the backends, so that the interface (``store.base``) knows none of its implementations."""

from __future__ import annotations

import re

from gantt.store.base import Store

_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/?#]*@", re.I)
_SECRET_PARAMETER = re.compile(r"([?&](?:password|passwd|pass|token|secret|credentials?|api_?key|key)=)[^&#]*",
                               re.I)


def redact_url(url: str) -> str:
    """A store URL fit for a log line or ``/health``: a user and password before the host and secret-named query
    parameters show as ``***``."""
    return _SECRET_PARAMETER.sub(r"\1***", _USERINFO.sub(r"\1***@", url))


def open_store(url: str, *, create: bool = True, namespace: str = "compute") -> Store:
    """``memory://``, ``sqlite:///path/to/file.sqlite`` (the default) or ``etcd://host:port[,host:port…]``.

    ``create=False``: a SQLite file that does not exist is an error (``gantt audit`` must not make one).
    ``namespace``: the partition of the store the object reads and writes (``gantt.model.namespaces``); each is
    separate in every respect (records, revisions, feed). A memory store is new at every call, so each namespace
    opened from ``memory://`` is its own.
    """
    # Imported when asked for: a process that opens SQLite never loads grpc (etcd's client), and the reverse.
    if url.startswith("memory:"):
        from gantt.store.memory import MemoryStore

        return MemoryStore(namespace=namespace)
    if url.startswith("sqlite:"):
        from gantt.store.sqlite import SQLiteStore

        return SQLiteStore(url, create=create, namespace=namespace)
    if url.startswith("etcd:"):
        from gantt.store.etcd import EtcdStore

        return EtcdStore(url, namespace=namespace)
    raise ValueError(f"unknown store URL {url!r}: use sqlite:///path, etcd://host:port[,…] or memory://")
