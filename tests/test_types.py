"""The type checker's escape hatch stays narrow: every ``type: ignore`` in src/ names the error it silences and says
why on the same line, so that the next reader can tell a checker's limit from a bug. (mypy itself runs in
scripts/test, before the suite: pyproject's [tool.mypy].)"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gantt"
EXPLAINED = re.compile(r"# type: ignore\[[-a-z_, ]+\]\s+#\s*\S")


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    bare = [f"{path.relative_to(SRC.parent)}:{number}: {line.strip()}"
            for path in sorted(SRC.rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if "type: ignore" in line and not EXPLAINED.search(line)]
    assert bare == [], "\n".join(bare)


def test_the_pattern_tells_an_explained_ignore_from_a_bare_one() -> None:
    assert EXPLAINED.search("x = f()  # type: ignore[no-any-return]  # numpy's stubs type .tolist() as Any")
    assert not EXPLAINED.search("x = f()  # type: ignore[no-any-return]")
    assert not EXPLAINED.search("x = f()  # type: ignore  # why")
