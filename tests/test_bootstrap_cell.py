"""The bootstrap cell, run for real in a fresh virtual environment that has no helpers.

Colab and a bare Jupyter have torch and friends but not this book's package; the first
cell of every chapter installs it from the repository. Here the cell runs in a new venv
whose only packages are the book's third-party dependencies (linked in, without helpers),
with ``HELPERS_SOURCE`` pointing at this local checkout instead of the remote repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
import bootstrap  # noqa: E402

OWN = ("helpers", "attention_book_helpers", "__editable__")


def _deps_only_dir(tmp_path: Path) -> Path:
    """A folder of links to every installed package except the book's own helpers."""
    site = Path(sysconfig.get_paths()["purelib"])
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith(OWN) or entry.suffix == ".pth":
            continue
        (deps / entry.name).symlink_to(entry)
    return deps


def _checkout_copy(tmp_path: Path) -> Path:
    """The files pip needs from this checkout, copied so that building leaves no trace."""
    source = tmp_path / "checkout"
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    return source


@pytest.mark.slow
def test_bootstrap_cell_installs_helpers_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    fresh_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    (Path(fresh_site) / "book_deps.pth").write_text(str(_deps_only_dir(tmp_path)) + "\n")
    source = _checkout_copy(tmp_path)
    env = {**os.environ, "HELPERS_SOURCE": str(source), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)

    before = subprocess.run([python, "-c", "import helpers"], capture_output=True, env=env)
    assert before.returncode != 0, "the fresh venv must start without helpers"

    cell = bootstrap.cell_source()
    run = subprocess.run([python, "-c", cell], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == 0, f"the bootstrap cell failed:\n{run.stdout}\n{run.stderr}"

    check = subprocess.run(
        [python, "-c", "import helpers, helpers.widgets, helpers.kernels; print(helpers.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip().startswith(fresh_site), (
        f"helpers should be installed into the fresh venv, imported from {check.stdout}")

    again = subprocess.run([python, "-c", cell], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
    assert again.returncode == 0 and "pip" not in again.stdout + again.stderr, (
        "a second run must be a no-op once helpers is importable")
