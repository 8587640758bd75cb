"""The house stays walkable: no module of src/gantt over 600 lines, no function over 80 (issue 32). A module that
grows past it is split by job, not trimmed; docs/design.md §2 lists what each module is for."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gantt"
MODULE_LINES = 600
FUNCTION_LINES = 80


def _oversized() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(SRC.parent)
        if text.count("\n") > MODULE_LINES:
            found.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_over_600_lines_and_no_function_over_80() -> None:
    assert _oversized() == []
