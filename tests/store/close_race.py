"""Close a SQLite store while other threads read and write through it, many times: run as a script
(``python -m tests.store.close_race ROUNDS``) by test_close_while_in_use, so that a crash in the sqlite3 module
ends this process with faulthandler's stacks, not the pytest worker. Prints what the threads saw, as JSON."""

from __future__ import annotations

import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter

from gantt.model import StoreUnavailable
from gantt.store.base import Batch
from gantt.store.sqlite import SQLiteStore
from tests.store.contract import report

READERS = 3


def one_round(path: str, seen: Counter[str]) -> None:
    store = SQLiteStore(f"sqlite:///{path}")
    store.commit(Batch(reports=[report("h0")]))
    stop = threading.Event()

    def read(way: int) -> None:
        n = 0
        while not stop.is_set() and n < 20_000:  # bounded: close() comes within 20 ms
            n += 1
            try:
                if way == 0:
                    store.head()
                elif way == 1:
                    store.changes(0, timeout=0)
                else:
                    store.snapshot()
            except StoreUnavailable:
                seen["refused after close"] += 1
                return
        seen["reads"] += n

    def write() -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            try:
                store.commit(Batch(reports=[report(f"h{i % 50}", vcpus_used=i % 7)]))
            except StoreUnavailable:
                seen["writes refused after close"] += 1
                return

    threads = [threading.Thread(target=read, args=(i % 3,)) for i in range(READERS)]
    threads.append(threading.Thread(target=write))
    for thread in threads:
        thread.start()
    time.sleep(random.uniform(0, 0.02))
    store.close()
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
        if thread.is_alive():
            seen["threads still running"] += 1


def main() -> None:
    rounds = int(sys.argv[1])
    seen: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="gantt-close-race-") as tmp:
        for i in range(rounds):
            one_round(f"{tmp}/s{i}.sqlite", seen)
    print(json.dumps(dict(seen)))


if __name__ == "__main__":
    main()
