"""``gantt demo``: what it says about its rate, and ``--stay``, which keeps the service and its live view up."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx

# one line per message, not folded at 80 columns; a demo that hangs prints its threads' stacks on SIGABRT
ENV = {**os.environ, "COLUMNS": "300", "PYTHONFAULTHANDLER": "1"}
SMALL = ["--hosts", "30", "--requests", "60"]


def test_the_demo_says_why_its_rate_is_not_the_benchmarks() -> None:
    done = subprocess.run([sys.executable, "-m", "gantt", "demo", *SMALL], capture_output=True, text=True,
                          timeout=180, env=ENV)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "not the README's benchmark figure" in done.stdout
    assert re.search(r"live view: http://127\.0\.0\.1:\d+/ui/", done.stdout)


def test_stay_keeps_the_live_view_up_until_ctrl_c() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "gantt", "demo", *SMALL, "--stay"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=ENV)
    try:
        url = None
        seen = []
        deadline = time.monotonic() + 180
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            seen.append(line)
            found = re.search(r"open (http://\S+/ui/) \(the live view\); Ctrl-C to stop it", line)
            if found:
                url = found.group(1)
        assert url is not None, "".join(seen)[-3000:]
        time.sleep(1.0)  # still up after the demo is done
        answer = httpx.get(url, timeout=10)
        assert answer.status_code == 200 and "<html" in answer.text.lower()
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # faulthandler: where it hangs, in the failure's message
            hung, _ = proc.communicate(timeout=30)
            raise AssertionError(f"the demo did not stop within 30 s of Ctrl-C:\n{hung[-6000:]}") from None
        assert proc.returncode == 0
        rest = proc.stdout.read()  # type: ignore[union-attr]
        assert "server stopped" in rest
        try:
            httpx.get(url, timeout=2)
        except httpx.TransportError:
            pass
        else:
            raise AssertionError("the service still answers after Ctrl-C")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
