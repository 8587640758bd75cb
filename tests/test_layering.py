"""The house's walls: packages stand in layers and import only downwards, no module imports itself round a circle,
the client loads no server code, and the HTTP layer talks to the façade only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gantt"

# Gantt's packages, bottom first (docs/design.md §2 draws them). A module may import its own package and any package
# of a lower row; packages in one row are siblings and import neither each other nor anything above them.
LAYERS: list[tuple[str, ...]] = [
    ("base",),                          # ids, quotes, clocks, the plugin registry: no Gantt imports at all
    ("model",),                         # the data contract every layer speaks
    ("config",),                        # options; reads nova.conf
    ("resources",),                     # provider trees, inventories, classes and traits
    ("store", "compute"),               # where state is kept; how a compute host is chosen
    ("replication",),                   # the store followed in memory, claims committed
    ("placement", "volume"),            # the other two domains, each with its façade over a replica
    ("service",),                       # HTTP
    ("client", "bench", "sim"),         # tools that use the service or the engine
    ("nova",),                          # Nova's scheduler seam (needs nova installed)
    ("gantt", "cli"),                   # the library's face (gantt/__init__.py) and the command line
    ("__main__",),                      # python -m gantt
]



def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gantt"


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every module's imports of other Gantt modules, at any depth of the file (a deferred import is an arrow too;
    only a lazy ``importlib`` lookup is not)."""
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    found.add(target)
        edges[name] = found
    return edges


def _rank() -> dict[str, int]:
    return {package: row for row, packages in enumerate(LAYERS) for package in packages}


def test_every_package_has_a_place_in_the_layers() -> None:
    rank = _rank()
    assert {_package(module) for module in _modules()} <= rank.keys()


def test_imports_run_down_the_layers_only() -> None:
    rank = _rank()
    upward = set()
    for module, targets in _imports(_modules()).items():
        for target in targets:
            mine, theirs = _package(module), _package(target)
            if mine != theirs and rank[theirs] >= rank[mine]:
                upward.add((module, target))
    assert upward == set(), sorted(upward)


def _circles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected sets of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: set[frozenset[str]] = set()
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    circles.add(frozenset(members))
    return circles


def test_no_module_imports_itself_round_a_circle() -> None:
    circles = _circles(_imports(_modules()))
    assert circles == set(), [sorted(c) for c in circles]


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


def test_the_client_and_its_wire_types_load_no_server_code() -> None:
    probe = ("import sys, gantt.client, gantt.service.schemas\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'numpy', 'grpc')\n"
             "             or m.startswith(('gantt.store', 'gantt.replication', 'gantt.compute.state',\n"
             "                              'gantt.compute.engine', 'gantt.compute.scheduler', 'gantt.service.app'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_http_app_imports_the_facade_the_model_the_wire_types_and_its_options_only() -> None:
    """Every module of Gantt's own HTTP app (those gantt.service.app reaches inside gantt.service: the runtime, the
    guard, the routes and handlers, the fast path) talks to the replica, the Placement façade, the model, the
    options, the Placement face it mounts and the wire types and metrics, never to a table, scheduler or store."""
    edges = _imports(_modules())
    # the wire types, the counters and the OpenAPI document: no app code
    leaves = {"gantt.service.schemas", "gantt.service.metrics", "gantt.service.openapi.document"}
    app, todo = set(), ["gantt.service.app"]
    while todo:
        module = todo.pop()
        if module not in app:
            app.add(module)
            todo.extend(t for t in edges[module] if t.startswith("gantt.service.") and t not in leaves)
    assert {"gantt.service.runtime", "gantt.service.handlers", "gantt.service.routes", "gantt.service.hot"} <= app
    allowed = {"gantt.replication.replica", "gantt.placement.facade", "gantt.model", "gantt.config",
               "gantt.placement.api", "gantt.base.ids", "gantt.base.version", *leaves}
    for module in sorted(app):
        source = _modules()[module].read_text()
        outside = {target for target in edges[module] if target not in app}
        assert outside <= allowed, (module, outside - allowed)
        assert "replica.table" not in source and "replica.scheduler" not in source and "replica.store" not in source


def test_the_placement_face_imports_the_facade_and_the_domain_only() -> None:
    """Placement's handlers talk to the façade and the domain modules, never to its table or a store."""
    # gantt.replication.steps and .driver: the type of a write's steps and of the runtime the replica runs them with;
    # gantt.base: request ids, uuids, how much of a client's value a refusal repeats (none has state of Gantt's nor
    # imports anything of it)
    allowed = {"gantt", "gantt.placement.facade", "gantt.model", "gantt.resources.providers",
               "gantt.resources.catalog", "gantt.placement.candidates", "gantt.replication.steps",
               "gantt.replication.driver", "gantt.base.ids", "gantt.base.quote"}
    for path in (SRC / "placement" / "api").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("gantt") and not node.module.startswith("gantt.placement.api")}
        assert imported <= allowed, (path.name, imported)
        source = path.read_text()
        assert "replica.table" not in source and "replica.store" not in source and ".scheduler" not in source


# The one exception: `gantt nova-scheduler` imports gantt.nova inside its command function, where nova is installed
# (it refuses with a clear error where it is not), so importing the CLI never imports nova.
LAZY_NOVA = {("cli/nova.py", "cmd_nova_scheduler")}


def test_only_gantt_nova_imports_nova() -> None:
    """Core Gantt runs where nova is not installed: nova (and gantt.nova, which needs it) is imported by gantt.nova
    alone."""
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "nova"):
            continue
        tree = ast.parse(path.read_text())
        lazy = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                and (str(path.relative_to(SRC)), f.name) in LAZY_NOVA]
        skipped = {id(n) for f in lazy for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                assert name.split(".")[0] != "nova" and not name.startswith("gantt.nova"), (path, name)


def test_only_the_replica_drives_an_operation() -> None:
    """An operation (a claim, a write) is written once as steps and run by ``Replica.run`` or ``Replica.perform``,
    which choose where; nothing outside gantt.replication drives steps or makes a commit's two halves itself (the
    HTTP layer once did, four times over)."""
    # the drivers, the halves of a commit, and the names by which the HTTP layer once drove the replica's commits
    driving = ("drive_here", "drive_on_loop", "import advance", "._written(", ".uncontended()", "._uncontended()",
               "commit_on_loop(", ".write_on_loop", ".reads_in_place", "replica.select_steps", "replica.run_claims",
               "replica.node_count")
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "replication") or path.is_relative_to(SRC / "store"):
            continue
        source = path.read_text()
        assert not [name for name in driving if name in source], (path.relative_to(SRC), driving)
