"""Runs under the reference virtualenv (openstack-placement), never imports gantt: serves Placement's WSGI app on
an inherited listening socket. argv: config directory (holding placement.conf), socket fd."""

from __future__ import annotations

import os
import socket
import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def get_environ(self) -> dict[str, str]:
        # wsgiref makes up ``text/plain`` for a request that names no content type; uwsgi and gunicorn, which
        # Placement is deployed under, pass none, and Placement answers differently (basic-http.yaml).
        environ = super().get_environ()
        if self.headers.get("content-type") is None:
            environ.pop("CONTENT_TYPE", None)
        return environ


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def main() -> None:
    os.environ["OS_PLACEMENT_CONFIG_DIR"] = sys.argv[1]
    from placement import wsgi

    app = wsgi.init_application()
    server = _Server(("127.0.0.1", 0), _Quiet, bind_and_activate=False)
    server.socket = socket.socket(fileno=int(sys.argv[2]))
    server.server_address = server.socket.getsockname()
    server.server_name, server.server_port = server.server_address[:2]
    server.setup_environ()
    server.set_app(app)
    server.serve_forever()


if __name__ == "__main__":
    main()
