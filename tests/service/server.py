"""``ServerProcess`` for tests: a real ``gantt serve`` child on a free loopback port (see gantt.cli.server_process).

    with ServerProcess("sqlite:///tmp/x.sqlite", config={...}, token="t") as server:
        server.client().health()
        server.kill()      # SIGKILL, as a crash
        server.start()     # same URL again: the parent keeps the listening socket
"""

from gantt.cli.server_process import ServerProcess, toml_text

__all__ = ["ServerProcess", "toml_text"]
