"""``pip install .`` (and so ``pipx install .``): a wheel built from the checkout holds every file the package
reads at run time (the live view's page and assets, py.typed), declares the ``gantt`` command and the ``sim``
extra, and, installed outside the checkout, serves the live view."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from gantt.cli.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.glob("gantt-*.whl")
    return built


def _package_files() -> list[str]:
    """Every file of the package as the checkout holds it (what git tracks under src/gantt)."""
    listed = subprocess.run(["git", "ls-files", "src/gantt"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [name.removeprefix("src/") for name in listed.stdout.split()]


def test_the_wheel_holds_every_file_of_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    files = _package_files()
    assert any(name.startswith("gantt/service/ui/") for name in files)
    missing = [name for name in files if name not in names]
    assert not missing, f"not in the wheel: {missing}"


def test_the_wheel_declares_the_command_and_the_extras(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = z.read(info).decode()
        entry_points = z.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert "gantt = gantt.cli:main" in entry_points
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    matplotlib = [line for line in requires if "matplotlib" in line]
    assert matplotlib and all("extra == \"sim\"" in line for line in matplotlib)
    assert "Provides-Extra: sim" in metadata


def test_installed_from_the_wheel_it_serves_the_live_view(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--disable-pip-version-check",
                           "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # The installed copy alone, not the checkout (its dependencies come from this interpreter's site-packages).
    env = {"PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-c", "import gantt; print(gantt.__file__)"], capture_output=True,
                           text=True, env={**os.environ, **env}, cwd=tmp_path, check=True).stdout.strip()
    assert where.startswith(str(target)), where
    with ServerProcess("memory://", env=env, workdir=tmp_path) as server:
        server.start()
        page = httpx.get(f"{server.url}/ui/", timeout=10)
        assert page.status_code == 200 and "<html" in page.text.lower()
        for asset in ("app.js", "style.css"):
            assert httpx.get(f"{server.url}/ui/{asset}", timeout=10).status_code == 200, asset


def test_the_release_number_is_the_same_in_pyproject_and_the_package() -> None:
    import tomllib

    from gantt.base.version import __version__

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == __version__
