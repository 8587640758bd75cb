"""The house's walls: the client loads no server code, and the HTTP layer talks to the façade only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gantt"


def test_the_client_and_its_wire_types_load_no_server_code() -> None:
    probe = ("import sys, gantt.client, gantt.service.schemas\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'numpy', 'grpc')\n"
             "             or m.startswith(('gantt.store', 'gantt.replica', 'gantt.state', 'gantt.engine',\n"
             "                              'gantt.scheduler', 'gantt.service.app'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_http_app_imports_the_facade_the_model_the_wire_types_and_its_options_only() -> None:
    tree = ast.parse((SRC / "service" / "app.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("gantt")}
    assert imported <= {"gantt", "gantt.replica", "gantt.model", "gantt.config", "gantt.service.schemas",
                        "gantt.service.metrics", "gantt.placement", "gantt.ids"}, imported
    source = (SRC / "service" / "app.py").read_text()
    assert "replica.table" not in source and "replica.scheduler" not in source and "replica.store" not in source


def test_the_placement_face_imports_the_facade_and_the_domain_only() -> None:
    """Placement's handlers talk to the replica and the domain modules, never to its table or a store."""
    # gantt.steps: how a write's steps are driven; gantt.ids: request ids and uuids; gantt.quote: how much of a
    # client's value a refusal repeats (none has state of Gantt's nor imports anything of it)
    allowed = {"gantt", "gantt.replica", "gantt.model", "gantt.providers", "gantt.catalog", "gantt.candidates",
               "gantt.steps", "gantt.ids", "gantt.quote"}
    for path in (SRC / "placement").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("gantt") and not node.module.startswith("gantt.placement")}
        assert imported <= allowed, (path.name, imported)
        source = path.read_text()
        assert "replica.table" not in source and "replica.store" not in source and ".scheduler" not in source


def test_only_gantt_nova_imports_nova() -> None:
    """Core Gantt runs where nova is not installed: nova (and gantt.nova, which needs it) is imported by gantt.nova
    alone."""
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "nova"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                assert name.split(".")[0] != "nova" and not name.startswith("gantt.nova"), (path, name)
